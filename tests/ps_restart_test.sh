#!/usr/bin/env bash
# Parameter-server shard restarts with real processes over loopback: a PS
# job with checkpoints (SYNC, SSP, ASYNC), two shards and two workers;
# shard 0 is killed with SIGKILL mid-job and a replacement `cohort ps`
# (started at once: it waits as a spare until the coordinator declares the
# shard dead) restores its newest checkpoint; the job must succeed with a
# good accuracy, the updates lost must be at most one checkpoint interval,
# and the workers' stall is printed. Then a replacement that finds no
# checkpoint must fail the job, saying why.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

every=20  # checkpoint.every_steps: updates of a shard between checkpoints
now() { date +%s.%N; }
# status PYTHON-EXPRESSION: evaluates it over the coordinator's
# StatusResponse (`s`, proto3 JSON: int64 fields are strings) and prints it.
status() {
  "$cohort" status --coordinator="$addr" --json --timeout=2 2>/dev/null |
    /usr/bin/python3 -c "import json,sys; s=json.load(sys.stdin); print($1)" 2>/dev/null
}
shard0() { status "s['shards'][0]$1"; }

# SPARSE: a recommendation model whose 26 tables of 100,000 rows live on
# the shards by row (embedding_bag.sparse, SYNC), on generated click logs;
# the rows a shard stores are in its checkpoints like its partitions.
sparse_spec() {  # sparse_spec EPOCHS CHECKPOINT-DIR
  cat <<SPEC
name: "ps-restart-sparse"
$(/usr/bin/python3 "$root/bench/ctr_torch.py" --cohort-model 100000 |
  sed -e 's/\(embedding_bag {[^}]*dim: [0-9]*\) }/\1 sparse: true }/')
data { kind: CRITEO dir: "$tmp/ctr" criteo { train: "train-00000.txt" test: "test.txt" table_rows: 100000 } }
batch_size: 32
epochs: $1
optimizer { kind: ADAGRAD lr: 0.05 }
loss: BCE_WITH_LOGITS
eval { metric: "auc" }
mode: PS
ps { consistency: SYNC shards: 2 rpc_timeout_ms: 3000 }
cluster { heartbeat_interval_ms: 300 heartbeat_misses: 10 min_workers: 2
          join_timeout_ms: 20000 }
checkpoint { dir: "$2" every_steps: $every keep: 3 }
SPEC
}

spec() {  # spec CONSISTENCY EPOCHS CHECKPOINT-DIR
  if [[ $1 == SPARSE ]]; then
    sparse_spec "$2" "$3"
    return
  fi
  cat <<SPEC
name: "ps-restart"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 4096 test_samples: 1024 } }
batch_size: 32
epochs: $2
optimizer { lr: 0.05 momentum: 0.9 }
mode: PS
ps { consistency: $1 shards: 2 partition_bytes: 40000 rpc_timeout_ms: 3000 }
cluster { heartbeat_interval_ms: 300 heartbeat_misses: 10 min_workers: 2
          join_timeout_ms: 20000 }
checkpoint { dir: "$3" every_steps: $every keep: 3 }
SPEC
}

start_job() {  # start_job NAME CONSISTENCY EPOCHS: sets addr, coord, w0, w1
  local name="$1"
  spec "$2" "$3" "$tmp/$name.ckpt" > "$tmp/$name.textproto"
  addr="127.0.0.1:$(free_port)"
  "$cohort" coordinator --job="$tmp/$name.textproto" --listen="$addr" \
    --report="$tmp/$name.json" 2>"$tmp/$name.coord.err" &
  coord=$!; pids+=($coord)
  # Clients started before it listens would back off for seconds.
  wait_for 10 status 's["state"]'
  for i in 0 1; do
    "$cohort" ps --coordinator="$addr" --listen=127.0.0.1:0 2>"$tmp/$name.ps$i.err" &
    pids+=($!)
  done
  # 64 steps an epoch at >= 20 ms a step: the job runs for several seconds.
  "$cohort" worker --coordinator="$addr" --quiet --min-step-ms=20 2>"$tmp/$name.w0.err" &
  w0=$!; pids+=($w0)
  "$cohort" worker --coordinator="$addr" --quiet --min-step-ms=20 2>"$tmp/$name.w1.err" &
  w1=$!; pids+=($w1)
}
running() { [[ "$(status 's["state"]')" == RUNNING ]]; }
version_above() { [[ "$(shard0 "['stats'].get('version', '0')")" -gt "$1" ]]; }
restored() { [[ "$(shard0 "['stats'].get('restored', False)")" == True ]]; }

# Whether status shows a heartbeat of shard 0 sent more than 0.1 s (time
# for the pushes in flight) after the Unix time $1.
heartbeat_after() {
  local asked age
  asked=$(now)
  age=$(shard0 ".get('heartbeatAgeS', 0)")
  [[ -n "$age" ]] &&
    awk -v a="$asked" -v g="$age" -v t="$1" 'BEGIN { exit !(a - g > t + 0.1) }'
}

# Stops the workers for 1 s, in which shard 0 heartbeats its final version
# (every 0.3 s), kills the shard with SIGKILL and resumes the workers; then
# reads that version from status, which keeps a dead shard's last
# heartbeat. Reading it while the workers are stopped would stretch their
# pause by the status calls, which a busy machine makes seconds long, past
# the heartbeat bound (3 s). Sets killed_version and t_kill.
kill_shard0() {
  local pid stopped
  pid=$(shard0 "['pid']")
  kill -STOP "$w0" "$w1"
  stopped=$EPOCHREALTIME
  sleep 1
  kill -9 "$pid"
  kill -CONT "$w0" "$w1"
  t_kill=$(now)
  heartbeat_after "$stopped" ||
    fail "shard 0 did not heartbeat while the workers were stopped (1 s):" \
      "the version it was killed at is not known"
  killed_version=$(shard0 "['stats'].get('version', '0')")
}

# "answered again after 1.52s" (absl durations: 950ms, 1.5s, 1m2s) from
# the workers' logs, the longest, in seconds.
stall_of() {
  grep -ho 'answered again after [^ ]*' "$@" | awk '{ print $4 }' |
    /usr/bin/python3 -c '
import re, sys
units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
worst = 0.0
for line in sys.stdin:
    total = sum(float(v) * units[u] for v, u in re.findall(r"([0-9.]+)(ms|us|ns|h|m|s)", line))
    worst = max(worst, total)
print("%.2f" % worst)'
}

variants=(SYNC SSP ASYNC)
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  /usr/bin/python3 "$root/tools/make-ctr-data" --out "$tmp/ctr" \
    --train-rows 20000 --test-rows 4000 --seed 4 >/dev/null &&
    variants+=(SPARSE)
else
  echo "SKIP: SPARSE: /usr/bin/python3 lacks numpy (tools/make-ctr-data)"
fi
for c in "${variants[@]}"; do
  epochs=3
  [[ $c == SPARSE ]] && epochs=1
  start_job "$c" "$c" "$epochs"
  if ! wait_for 30 running || ! wait_for 20 version_above 40; then
    fail "$c: the job never ran: $(tail -n 3 "$tmp/$c.coord.err" "$tmp/$c.w0.err")"
    continue
  fi
  kill_shard0
  # The replacement starts at once, as a supervisor would restart it.
  "$cohort" ps --coordinator="$addr" --listen=127.0.0.1:0 2>"$tmp/$c.ps2.err" &
  pids+=($!)
  if ! wait_for 30 restored; then
    fail "$c: no replacement restored shard 0: $(tail -n 3 "$tmp/$c.coord.err" "$tmp/$c.ps2.err")"
    continue
  fi
  t_restored=$(now)
  restored_version=$(shard0 "['stats']['restoredVersion']")
  restarts=$(shard0 "['restarts']")
  wait "$w0"; rc0=$?
  wait "$w1"; rc1=$?
  wait "$coord"; rcc=$?
  state=$(/usr/bin/python3 -c "import json; print(json.load(open('$tmp/$c.json'))['state'])" 2>/dev/null)
  # The click model's measure is its AUC (the data's ceiling is about 0.8).
  key="['test_accuracy']" least=0.9 what=accuracy
  [[ $c == SPARSE ]] && key="['test_metrics']['auc']" least=0.7 what=auc
  acc=$(/usr/bin/python3 -c "import json; print(json.load(open('$tmp/$c.json'))$key)" 2>/dev/null)
  lost=$((killed_version - restored_version))
  stall=$(stall_of "$tmp/$c.w0.err" "$tmp/$c.w1.err")
  serving=$(awk -v a="$t_kill" -v b="$t_restored" 'BEGIN { printf "%.2f", b - a }')
  echo "$c: shard 0 killed at version $killed_version, restored version $restored_version" \
    "(lost $lost updates, checkpoint every $every), replacement restored ${serving}s after the kill," \
    "workers stalled ${stall}s, restarts $restarts, $what $acc"
  if [[ $rc0 -eq 0 && $rc1 -eq 0 && $rcc -eq 0 && "$state" == SUCCEEDED ]] &&
     /usr/bin/python3 -c "import sys; sys.exit(0 if $acc >= $least else 1)"; then
    ok "$c: the job succeeded after the restart ($what $acc)"
  else
    fail "$c: after the restart: workers exit $rc0 $rc1, coordinator $rcc, state '$state', $what '$acc': $(tail -n 3 "$tmp/$c.coord.err" "$tmp/$c.w0.err")"
  fi
  if [[ $lost -ge 0 && $lost -le $every && $restarts == 1 ]]; then
    ok "$c: $lost updates lost, at most one checkpoint interval ($every)"
  else
    fail "$c: lost $lost updates (killed at $killed_version, restored $restored_version), restarts '$restarts'"
  fi
  if /usr/bin/python3 -c "import sys; sys.exit(0 if 0 < $stall <= 15 else 1)"; then
    ok "$c: workers retried through the restart, stalled ${stall}s"
  else
    fail "$c: workers' stall '${stall}' (no retry seen, or too long): $(cat "$tmp/$c.w0.err")"
  fi
done

# A replacement with no checkpoint to restore (the directory is gone) must
# not serve: the job fails, naming the shard and the directory.
start_job none SYNC 20
if wait_for 30 running && wait_for 20 version_above 10; then
  kill_shard0
  rm -rf "$tmp/none.ckpt/shard-0"
  "$cohort" ps --coordinator="$addr" --listen=127.0.0.1:0 2>"$tmp/none.ps2.err" &
  spare=$!; pids+=($spare)
  wait "$spare"; rcs=$?
  wait "$coord"; rcc=$?
  reason=$(grep -h "FAILED" "$tmp/none.coord.err" | tail -n 1)
  if [[ $rcs -ne 0 && $rcc -ne 0 && "$reason" == *"shard 0"*"cannot serve"*"no checkpoint in $tmp/none.ckpt/shard-0"* ]]; then
    ok "no checkpoint: the replacement refused to serve and the job failed: $reason"
  else
    fail "no checkpoint: replacement exit $rcs, coordinator $rcc, reason '$reason': $(tail -n 2 "$tmp/none.ps2.err")"
  fi
else
  fail "no checkpoint: the job never ran: $(tail -n 3 "$tmp/none.coord.err")"
fi

finish
