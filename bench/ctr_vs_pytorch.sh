#!/usr/bin/env bash
# A click-through-rate model, cohort against PyTorch 1.13, one pass over
# the same generated click logs for each table size.
#
#   bench/ctr_vs_pytorch.sh COHORT [--rows=100000,1000000] [--train-rows=400000]
#                           [--test-rows=40000] [--threads=1] [--data=DIR]
#
# Data: tools/make-ctr-data (seed 5) into DIR (a temporary directory unless
# --data names one that already holds meta.json). For each table size R
# (rows of each of the 26 tables) the same DLRM as the zoo's dlrm_small
# with R-row tables, batch 128 per step, Adagrad lr 0.05, trains one pass:
#   - PyTorch: bench/ctr_torch.py, nn.EmbeddingBag(sparse=True), one
#     process, torch.set_num_threads(THREADS);
#   - cohort train --threads=THREADS: one process, dense table gradients;
#   - cohort local --workers=2 --threads=THREADS: 2 workers, batch 64 each,
#     the tables' whole gradients all-reduced every step.
# Printed per run: training samples/s, test AUC, the process's peak RSS
# (not for cohort local's workers) and wall seconds (data parsing
# included). Needs NumPy and PyTorch in /usr/bin/python3. Exit status 1 if a run fails or an AUC is below 0.7.
set -euo pipefail
if [[ $# -lt 1 ]]; then
  echo "usage: bench/ctr_vs_pytorch.sh COHORT [--rows=R1,R2] [--train-rows=N] [--test-rows=N] [--threads=T] [--data=DIR]" >&2
  exit 2
fi
cohort=$(realpath "$1")
shift
rows=100000,1000000
train_rows=400000
test_rows=40000
threads=1
data=""
for arg in "$@"; do
  case "$arg" in
    --rows=*) rows=${arg#*=} ;;
    --train-rows=*) train_rows=${arg#*=} ;;
    --test-rows=*) test_rows=${arg#*=} ;;
    --threads=*) threads=${arg#*=} ;;
    --data=*) data=${arg#*=} ;;
    *) echo "unknown flag $arg" >&2; exit 2 ;;
  esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[[ -n "$data" ]] || data="$tmp/data"
if [[ ! -f "$data/meta.json" ]]; then
  $py "$root/tools/make-ctr-data" --out "$data" --train-rows "$train_rows" \
    --test-rows "$test_rows" --seed 5 >/dev/null
fi
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
# Both sides on OpenBLAS's kernels for this CPU where it does not know it
# (bench/blas_env.py).
core=$($py "$root/bench/blas_env.py") || exit 1
[[ -z "$core" ]] || export OPENBLAS_CORETYPE=$core

# The zoo's dlrm_small as layers (bench/ctr_torch.py writes them), with
# tables of $1 rows, batch $2.
spec() {
  cat <<SPEC
name: "ctr-bench"
$($py "$root/bench/ctr_torch.py" --cohort-model "$1")
data { kind: CRITEO dir: "$data" criteo { train: "train-00000.txt" test: "test.txt" table_rows: $1 } }
batch_size: $2
epochs: 1
optimizer { kind: ADAGRAD lr: 0.05 }
loss: BCE_WITH_LOGITS
eval { metric: "auc" }
seed: 1
SPEC
}

# report FILE KEY...: the report's values.
report() {
  $py - "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
out = []
for key in sys.argv[2:]:
    v = r
    for part in key.split("."):
        v = v.get(part, {}) if isinstance(v, dict) else {}
    out.append(str(v) if v != {} else "?")
print(" ".join(out))
PY
}

status=0
echo "| table rows | run | samples/s | test AUC | peak RSS MB | seconds |"
echo "|---|---|---|---|---|---|"
for r in ${rows//,/ }; do
  line=$(/usr/bin/time -f "%M" -o "$tmp/rss" $py "$root/bench/ctr_torch.py" \
    --train "$data/train-00000.txt" --test "$data/test.txt" --batch 128 \
    --lr 0.05 --rows "$r" --threads "$threads")
  read -r _ sps _ auc _ _ _ _ _ secs <<< "$line"
  echo "| $r | PyTorch, 1 process | ${sps%.*} | $auc | $(($(cat "$tmp/rss") / 1024)) | $secs |"
  $py -c "import sys; sys.exit(0 if $auc >= 0.7 else 1)" || status=1

  spec "$r" 128 > "$tmp/one.textproto"
  start=$SECONDS
  /usr/bin/time -f "%M" -o "$tmp/rss" "$cohort" train --job="$tmp/one.textproto" \
    --threads="$threads" --quiet --report="$tmp/one.json" >/dev/null || status=1
  read -r sps auc <<< "$(report "$tmp/one.json" samples_per_s test_metrics.auc)"
  echo "| $r | cohort train | ${sps%.*} | $auc | $(($(cat "$tmp/rss") / 1024)) | $((SECONDS - start)) |"

  spec "$r" 64 > "$tmp/two.textproto"
  start=$SECONDS
  "$cohort" local --workers=2 --threads="$threads" --job="$tmp/two.textproto" \
    --quiet --report="$tmp/two.json" >"$tmp/two.log" 2>&1 ||
    { status=1; tail -3 "$tmp/two.log" >&2; }
  read -r sps auc <<< "$(report "$tmp/two.json" samples_per_s test_metrics.auc)"
  echo "| $r | cohort local, 2 workers, all-reduce | ${sps%.*} | $auc | - | $((SECONDS - start)) |"
done
exit $status
