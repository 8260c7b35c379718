#!/usr/bin/env bash
# A click-through-rate model with sparse embedding tables on the parameter
# servers, against PyTorch 1.13 and against cohort's dense all-reduce: one
# pass over the same generated click logs for each table size.
#
#   bench/ctr_sparse_ps.sh COHORT [--rows=100000,1000000,10000000]
#       [--train-rows=400000] [--test-rows=40000] [--threads=1] [--data=DIR]
#       [--dense-steps=N] [--min-speedup=X] [--min-byte-ratio=Y]
#
# Data: tools/make-ctr-data (seed 5) into DIR (a temporary directory unless
# --data names one that already holds meta.json). For each table size R
# (rows of each of the 26 tables) the DLRM of bench/ctr_vs_pytorch.sh (the
# zoo's dlrm_small with R-row tables, dim 16), batch 128 per step in all,
# Adagrad lr 0.05, trains one pass:
#   - PyTorch: bench/ctr_torch.py, nn.EmbeddingBag(sparse=True), one
#     process, THREADS threads;
#   - cohort PS, sparse tables (embedding_bag.sparse, SYNC consistency):
#     1 worker + 1 shard at batch 128, then 2 workers + 2 shards at batch
#     64 each; every process started by hand (bench/ps_cluster.sh);
#   - cohort all-reduce, dense tables, 2 workers at batch 64 each, started
#     by hand the same way.
# --dense-steps=N stops the all-reduce run after N steps instead of the
# whole pass (its tables' every row is zeroed, stepped and all-reduced each
# step, which makes a pass over large tables take hours here): its
# samples/s, bytes and RSS are measured as before; its AUC, of a partial
# pass, is printed but not checked.
# A run is skipped, with a line saying why, when its tables would not fit
# in this machine's memory (MemTotal): PyTorch keeps the tables and
# Adagrad's dense state (2 x 26 R 16 x 4 bytes); each all-reduce worker the
# tables, their gradient, Adagrad's state and the all-reduce buffer
# (4 x 26 R 16 x 4 bytes), two workers on this machine.
#
# Printed per run: training samples/s (all workers together), test AUC,
# payload bytes per step per worker, each worker's peak RSS (/usr/bin/time
# %M), each shard's rows held at the end and its peak RSS, wall seconds
# (data parsing and start-up included). Payload bytes: in PS mode what the
# worker pushed plus what it pulled (the dense parameters and the touched
# rows, as float32), in all-reduce mode what it sent plus what it received
# (at 2 ranks each sends and receives the whole buffer once: twice the
# bytes all-reduced); the first pull of the parameters is included, row
# ids (8 bytes a row) and gRPC/Gloo framing are not. Under the table:
#   - speedup: sparse PS samples/s per worker thread over PyTorch's
#     samples/s per thread (each PS run);
#   - byte ratio: dense all-reduce bytes per step per worker over sparse PS
#     (2 workers) bytes per step per worker.
#
# Exit status 1 if a run fails, an AUC is below 0.7, or (when given) a
# speedup is below --min-speedup or a byte ratio below --min-byte-ratio.
# Needs NumPy and PyTorch in /usr/bin/python3, and /usr/bin/time.
set -uo pipefail
usage="usage: bench/ctr_sparse_ps.sh COHORT [--rows=R1,R2,...] [--train-rows=N] [--test-rows=N] [--threads=T] [--data=DIR] [--dense-steps=N] [--min-speedup=X] [--min-byte-ratio=Y]"
if [[ $# -lt 1 || ! -x "$1" ]]; then
  echo "$usage" >&2
  exit 2
fi
cohort=$(realpath "$1")
shift
rows=100000,1000000,10000000
train_rows=400000
test_rows=40000
threads=1
data=""
min_speedup=""
min_byte_ratio=""
dense_steps=0
for arg in "$@"; do
  case "$arg" in
    --rows=*) rows=${arg#*=} ;;
    --train-rows=*) train_rows=${arg#*=} ;;
    --test-rows=*) test_rows=${arg#*=} ;;
    --threads=*) threads=${arg#*=} ;;
    --data=*) data=${arg#*=} ;;
    --dense-steps=*) dense_steps=${arg#*=} ;;
    --min-speedup=*) min_speedup=${arg#*=} ;;
    --min-byte-ratio=*) min_byte_ratio=${arg#*=} ;;
    *) echo "unknown flag $arg; $usage" >&2; exit 2 ;;
  esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py=/usr/bin/python3
tmp=$(mktemp -d)
source "$root/bench/ps_cluster.sh"
trap 'cluster_cleanup; rm -rf "$tmp"' EXIT
[[ -n "$data" ]] || data="$tmp/data"
if [[ ! -f "$data/meta.json" ]]; then
  $py "$root/tools/make-ctr-data" --out "$data" --train-rows "$train_rows" \
    --test-rows "$test_rows" --seed 5 >/dev/null || exit 1
fi
# The rows the data holds (--data may name data made with other flags).
train_rows=$($py -c "import json; print(json.load(open('$data/meta.json'))['rows']['train'])")
pass_steps=$(((train_rows + 127) / 128))
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
# Both sides on OpenBLAS's kernels for this CPU where it does not know it
# (bench/blas_env.py).
core=$($py "$root/bench/blas_env.py") || exit 1
[[ -z "$core" ]] || export OPENBLAS_CORETYPE=$core
mem_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
tables=26
dim=16

# spec ROWS BATCH-PER-WORKER sparse|dense: the job, PS mode for sparse.
spec() {
  local sparse=()
  [[ $3 == sparse ]] && sparse=(--sparse)
  cat <<SPEC
name: "ctr-sparse-bench"
$($py "$root/bench/ctr_torch.py" --cohort-model "$1" "${sparse[@]}")
data { kind: CRITEO dir: "$data" criteo { train: "train-00000.txt" test: "test.txt" table_rows: $1 } }
batch_size: $2
epochs: 1
optimizer { kind: ADAGRAD lr: 0.05 }
loss: BCE_WITH_LOGITS
eval { metric: "auc" }
seed: 1
SPEC
  [[ $3 == sparse ]] && echo "mode: PS"
  partial && [[ $3 == dense ]] && echo "max_steps: $dense_steps"
  return 0
}

# Whether the all-reduce run stops before the end of the pass.
partial() { [[ $dense_steps -gt 0 && $dense_steps -lt $pass_steps ]]; }

# fits COPIES PROCESSES ROWS: whether PROCESSES x COPIES copies of the
# tables (26 x ROWS x 16 float32) fit in MemTotal.
fits() {
  awk -v c="$1" -v p="$2" -v r="$3" -v t=$tables -v d=$dim -v m="$mem_kb" \
    'BEGIN { exit !(c * p * t * r * d * 4 < m * 1024) }'
}
gib() { awk -v c="$1" -v r="$2" -v t=$tables -v d=$dim 'BEGIN { printf "%.1f", c * t * r * d * 4 / 2^30 }'; }
check_auc() {  # check_auc NAME AUC
  if ! $py -c "import sys; sys.exit(0 if float('$2') >= 0.7 else 1)" 2>/dev/null; then
    echo "FAIL: $1: AUC '$2' below 0.7" >&2
    status=1
  fi
}

# run_cohort NAME ROWS sparse|dense WORKERS SHARDS: one job started by hand;
# prints its table row and sets `sps` and `bytes` (per step per worker).
run_cohort() {
  local name=$1 r=$2 kind=$3 workers=$4 shards=$5 start=$SECONDS
  local auc state steps w_rss rows s_rss label
  spec "$r" $((128 / workers)) "$kind" > "$tmp/$name.textproto"
  [[ $kind == sparse ]] && echo "ps { shards: $shards }" >> "$tmp/$name.textproto"
  cluster_start "$name" "$tmp/$name.textproto" "$workers" "$shards" "$threads"
  if ! cluster_wait "$name"; then
    echo "FAIL: $name: $(tail -n 2 "$tmp/$name".*.err | grep -v '^$' | tail -n 4)" >&2
    status=1
  fi
  read -r sps auc state steps bytes w_rss rows s_rss <<< "$(cluster_summary "$name")"
  [[ $state == SUCCEEDED ]] || { echo "FAIL: $name: job $state" >&2; status=1; }
  # All-reduce at 2 ranks: each worker sends and receives the whole buffer.
  [[ $kind == dense && $bytes != "?" ]] && bytes=$((bytes * 2 * (workers - 1)))
  if [[ $kind == sparse ]]; then
    label="cohort PS, sparse, $workers worker$(plural "$workers") + $shards shard$(plural "$shards")"
  else
    label="cohort all-reduce, dense, $workers workers"
  fi
  if [[ $kind == dense ]] && partial; then
    label="$label, first $steps steps only"
    auc="$auc (partial pass, not checked)"
  else
    check_auc "$name" "$auc"
  fi
  echo "| $r | $label | ${sps%.*} | $auc | $bytes | $w_rss | ${rows//,/, } | ${s_rss//,/, } | $((SECONDS - start)) |"
}

plural() { [[ $1 == 1 ]] || echo s; }
# ratio A B: A / B to 3 significant digits, or "?".
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3g", a / b; else print "?" }'; }
# below X MIN: whether X is missing or under MIN (MIN given).
below() { [[ -n "$2" ]] && awk -v x="$1" -v m="$2" 'BEGIN { exit !(x == "?" || x + 0 < m + 0) }'; }

status=0
for r in ${rows//,/ }; do
  echo
  echo "### Tables of $r rows (26 x $r x $dim), $train_rows training rows, $threads thread$(plural "$threads") per process"
  echo
  echo "Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg) ($(grep -c ^processor /proc/cpuinfo) cores)."
  echo
  echo "| table rows | run | samples/s | test AUC | payload bytes/step/worker | worker peak RSS MB | shard rows held | shard peak RSS MB | seconds |"
  echo "|---|---|---|---|---|---|---|---|---|"
  notes=()
  torch_sps=""
  if fits 2 1 "$r"; then
    start=$SECONDS
    if line=$(/usr/bin/time -f "%M" -o "$tmp/torch.rss" $py "$root/bench/ctr_torch.py" \
        --train "$data/train-00000.txt" --test "$data/test.txt" --batch 128 \
        --lr 0.05 --rows "$r" --threads "$threads"); then
      read -r _ torch_sps _ auc _ <<< "$line"
      echo "| $r | PyTorch, 1 process | ${torch_sps%.*} | $auc | - | $(($(tail -n 1 "$tmp/torch.rss") / 1024)) | - | - | $((SECONDS - start)) |"
      check_auc "PyTorch at $r rows" "$auc"
    else
      echo "FAIL: PyTorch at $r rows" >&2
      status=1
    fi
  else
    notes+=("PyTorch skipped: its tables and Adagrad state take $(gib 2 "$r") GiB, more than this machine's $((mem_kb / 1048576)) GiB")
  fi

  run_cohort "ps1-$r" "$r" sparse 1 1
  ps1_sps=$sps
  run_cohort "ps2-$r" "$r" sparse 2 2
  ps2_sps=$sps
  ps2_bytes=$bytes

  dense_bytes=""
  if fits 4 2 "$r"; then
    run_cohort "ar2-$r" "$r" dense 2 0
    dense_bytes=$bytes
  else
    notes+=("cohort all-reduce skipped: each of its 2 workers would hold $(gib 4 "$r") GiB (tables, gradient, Adagrad state, all-reduce buffer), $(gib 8 "$r") GiB in all, more than this machine's $((mem_kb / 1048576)) GiB")
  fi

  echo
  for n in "${notes[@]}"; do echo "- $n"; done
  if [[ -n "$torch_sps" ]]; then
    torch_per_thread=$(awk -v s="$torch_sps" -v t="$threads" 'BEGIN { print s / t }')
    for pair in "1:$ps1_sps" "2:$ps2_sps"; do
      w=${pair%%:*}
      x=$(ratio "$(awk -v s="${pair#*:}" -v w="$w" -v t="$threads" 'BEGIN { print (s == "?") ? "?" : s / (w * t) }')" "$torch_per_thread")
      echo "- speedup, sparse PS with $w worker$(plural "$w"): $x (samples/s per worker thread over PyTorch's per thread)"
      if below "$x" "$min_speedup"; then
        echo "FAIL: speedup $x below --min-speedup=$min_speedup" >&2
        status=1
      fi
    done
  fi
  if [[ -n "$dense_bytes" ]]; then
    x=$(ratio "$dense_bytes" "$ps2_bytes")
    echo "- byte ratio: $x (dense all-reduce bytes per step per worker over sparse PS's, 2 workers each)"
    if below "$x" "$min_byte_ratio"; then
      echo "FAIL: byte ratio $x below --min-byte-ratio=$min_byte_ratio" >&2
      status=1
    fi
  fi
done
exit $status
