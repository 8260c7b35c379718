#!/usr/bin/env bash
# Sparse embedding tables far bigger than a worker's memory, through a
# parameter-server shard's death: the DLRM of bench/ctr_sparse_ps.sh with
# 26 tables of ROWS x DIM (default 40,000,000 x 32: 133 GB as dense float32,
# 266 GB with Adagrad's state) and a bottom MLP of DIM outputs, one pass by
# 2 workers (batch 64 each, Adagrad lr 0.05, SYNC) over 2 shards that
# checkpoint every --every-steps updates. Once the workers are --kill-at of
# the way through the pass, shard 0 is killed with SIGKILL and a spare
# `cohort ps`, started at once, restores its newest checkpoint.
#
#   bench/sparse_big_table.sh COHORT [--rows=40000000] [--dim=32]
#       [--train-rows=1000000] [--test-rows=40000] [--limit-mb=1024]
#       [--every-steps=1000] [--kill-at=0.5] [--threads=1] [--data=DIR]
#
# Data: tools/make-ctr-data (seed 5) into DIR (a temporary directory unless
# --data names one that already holds meta.json).
#
# The memory limit is checked by measuring, not enforced: each worker's
# peak RSS (VmHWM, from /usr/bin/time %M) must stay within --limit-mb. An
# address-space limit (`prlimit --as`) cannot stand in for it: a worker
# reserves far more address space than it touches (glibc's malloc arenas,
# one per thread up to 8 per core, and 8 MB thread stacks; VmPeak 1.0-1.4
# GB against a VmHWM of 45 MB on this machine). Under
# `prlimit --as=1073741824` one of two workers died at start with
# std::bad_alloc, and a worker alone trained its pass, then spun in the
# evaluation without ending (it ends in 5 s without the limit). The peak
# RSS includes the pages of the mapped training records the worker read
# (66 float32 a row: 264 MB for 10^6 rows), so the train set should stay
# well below the limit; the peak of RssAnon, sampled every 0.5 s, is
# printed beside it.
#
# Printed: per worker the peak RSS and sampled peak RssAnon, per shard the
# rows held at the end (shard 0: the replacement's), the workers' longest
# stall ("answered again after" in their logs), the updates shard 0 lost
# (its version at its last heartbeat before the kill minus the version it
# restored), how long after the kill the replacement had restored, samples/s
# and the test AUC. Exit status 1 if the job did not succeed, no
# replacement restored shard 0, or a worker went over the limit.
# Needs NumPy and PyTorch in /usr/bin/python3 and /usr/bin/time.
set -uo pipefail
usage="usage: bench/sparse_big_table.sh COHORT [--rows=N] [--dim=D] [--train-rows=N] [--test-rows=N] [--limit-mb=MB] [--every-steps=N] [--kill-at=F] [--threads=T] [--data=DIR]"
if [[ $# -lt 1 || ! -x "$1" ]]; then
  echo "$usage" >&2
  exit 2
fi
cohort=$(realpath "$1")
shift
rows=40000000
dim=32
train_rows=1000000
test_rows=40000
limit_mb=1024
every=1000
kill_at=0.5
threads=1
data=""
for arg in "$@"; do
  case "$arg" in
    --rows=*) rows=${arg#*=} ;;
    --dim=*) dim=${arg#*=} ;;
    --train-rows=*) train_rows=${arg#*=} ;;
    --test-rows=*) test_rows=${arg#*=} ;;
    --limit-mb=*) limit_mb=${arg#*=} ;;
    --every-steps=*) every=${arg#*=} ;;
    --kill-at=*) kill_at=${arg#*=} ;;
    --threads=*) threads=${arg#*=} ;;
    --data=*) data=${arg#*=} ;;
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
train_rows=$($py -c "import json; print(json.load(open('$data/meta.json'))['rows']['train'])")
pass_steps=$(((train_rows + 127) / 128))
kill_step=$(awk -v p=$pass_steps -v f="$kill_at" 'BEGIN { printf "%d", p * f }')
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads

cat > "$tmp/big.textproto" <<SPEC
name: "sparse-big-table"
$($py "$root/bench/ctr_torch.py" --cohort-model "$rows" --sparse --dim "$dim")
data { kind: CRITEO dir: "$data" criteo { train: "train-00000.txt" test: "test.txt" table_rows: $rows } }
batch_size: 64
epochs: 1
optimizer { kind: ADAGRAD lr: 0.05 }
loss: BCE_WITH_LOGITS
eval { metric: "auc" }
seed: 1
mode: PS
ps { shards: 2 }
cluster { heartbeat_interval_ms: 300 heartbeat_misses: 10 join_timeout_ms: 60000 }
checkpoint { dir: "$tmp/ckpt" every_steps: $every keep: 2 }
SPEC

now() { date +%s.%N; }
shard0() { cluster_status "s['shards'][0]$1"; }
# The slowest worker's step (0 before both report progress).
min_step() {
  cluster_status "min([int(w.get('progress', {}).get('step', 0)) for w in s['workers']] or [0]) if len(s['workers']) == 2 else 0"
}
# past and restored are polled through wait_for.
# shellcheck disable=SC2317
past() { [[ "$(min_step)" -ge "$1" ]]; }
# shellcheck disable=SC2317
restored() { [[ "$(shard0 "['stats'].get('restored', False)")" == True ]]; }

# sample_anon NAME PID...: the peak RssAnon (KB) of each PID, sampled every
# 0.5 s while it lives, into $tmp/NAME.anon$i.
sample_anon() {
  local name=$1 i=0 p
  shift
  for p in "$@"; do
    (peak=0
     while kb=$(awk '/^RssAnon:/ { print $2 }' "/proc/$p/status" 2>/dev/null) && [[ -n "$kb" ]]; do
       ((kb > peak)) && peak=$kb && echo "$peak" > "$tmp/$name.anon$i"
       sleep 0.5
     done) &
    cluster_pids+=("$!")
    i=$((i + 1))
  done
}

# "answered again after 1.52s" (absl durations: 950ms, 1.5s, 1m2s) in the
# workers' logs, the longest, in seconds.
stall_of() {
  grep -ho 'answered again after [^ ]*' "$@" | awk '{ print $4 }' |
    $py -c '
import re, sys
units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
worst = 0.0
for line in sys.stdin:
    total = sum(float(v) * units[u] for v, u in re.findall(r"([0-9.]+)(ms|us|ns|h|m|s)", line))
    worst = max(worst, total)
print("%.2f" % worst)'
}

status=0
start=$SECONDS
echo "tables: 26 x $rows x $dim (sparse), $train_rows training rows ($pass_steps steps of 128)," \
  "2 workers + 2 shards, checkpoint every $every updates; shard 0 killed at step $kill_step"
cluster_start big "$tmp/big.textproto" 2 2 "$threads"
if ! wait_for 120 past 1; then
  echo "FAIL: the job never ran: $(tail -n 3 "$tmp"/big.*.err)" >&2
  exit 1
fi
# Worker i is the i-th started, the child of its /usr/bin/time.
mapfile -t worker_pids < <(for p in "${cluster_workers[@]}"; do pgrep -P "$p"; done)
sample_anon big "${worker_pids[@]}"
if ! wait_for 7200 past "$kill_step"; then
  echo "FAIL: the workers did not reach step $kill_step: $(tail -n 3 "$tmp"/big.*.err)" >&2
  exit 1
fi
killed_version=$(shard0 "['stats'].get('version', '0')")
kill -9 "$(shard0 "['pid']")"
t_kill=$(now)
at_step=$(min_step)
# The replacement starts at once, as a supervisor would restart it; it
# waits as a spare until the coordinator declares shard 0 dead.
/usr/bin/time -f %M -o "$tmp/big.ps2.rss" "$cohort" ps --coordinator="$addr" \
  --listen=127.0.0.1:0 2>"$tmp/big.ps2.err" &
cluster_shards+=("$!")
cluster_pids+=("$!")
if wait_for 600 restored; then
  serving=$(awk -v a="$t_kill" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  restored_version=$(shard0 "['stats']['restoredVersion']")
else
  echo "FAIL: no replacement restored shard 0: $(tail -n 3 "$tmp/big.coord.err" "$tmp/big.ps2.err")" >&2
  status=1
  serving="?"
  restored_version="?"
fi
cluster_wait big || status=1
read -r sps auc state steps _ _ _ _ <<< "$(cluster_summary big)"
stall=$(stall_of "$tmp/big.w0.err" "$tmp/big.w1.err")
[[ $state == SUCCEEDED ]] || { echo "FAIL: the job ended $state: $(tail -n 2 "$tmp/big.coord.err")" >&2; status=1; }

echo
echo "| what | value |"
echo "|---|---|"
echo "| job | $state, $steps steps, $((SECONDS - start)) s wall |"
echo "| samples/s (both workers) | ${sps%.*} |"
echo "| test AUC | $auc |"
echo "| shard 0 killed | at worker step $at_step, version $killed_version (last heartbeat) |"
lost="?"
[[ $restored_version =~ ^[0-9]+$ && $killed_version =~ ^[0-9]+$ ]] &&
  lost=$((killed_version - restored_version))
echo "| replacement restored | version $restored_version, ${serving} s after the kill; $lost updates lost (checkpoint every $every) |"
echo "| workers' longest stall | ${stall} s |"
for i in 0 1; do
  hwm=$(tail -n 1 "$tmp/big.w$i.rss" 2>/dev/null)
  anon=$(cat "$tmp/big.anon$i" 2>/dev/null || echo 0)
  echo "| worker $i peak RSS (VmHWM) | $((${hwm:-0} / 1024)) MB (RssAnon peak $((anon / 1024)) MB; limit $limit_mb MB) |"
  if [[ -z "$hwm" || $((hwm / 1024)) -gt $limit_mb ]]; then
    echo "FAIL: worker $i peak RSS ${hwm:-?} KB over --limit-mb=$limit_mb" >&2
    status=1
  fi
done
$py - "$tmp/big.status.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for sh in s.get("shards", []):
    st = sh.get("stats", {})
    print(f"| shard {sh['index']} rows held at the end | {int(st.get('rowsHeld', 0)):,} "
          f"(restarts {sh.get('restarts', 0)}) |")
PY
for f in big.ps0 big.ps1 big.ps2; do
  [[ -s "$tmp/$f.rss" ]] && echo "| ${f#big.} peak RSS | $(($(tail -n 1 "$tmp/$f.rss" | grep -o '^[0-9]*' || echo 0) / 1024)) MB |"
done
echo "| checkpoints at the end | $(du -sh "$tmp/ckpt" | cut -f1) |"
exit $status
