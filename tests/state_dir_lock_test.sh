#!/usr/bin/env bash
# Two coordinators must not share one --state-dir. A
# second one exits 2 naming the first one's pid and address; after the
# first is killed with kill -9 (the kernel drops its lock), a restart on the
# same directory takes it over.
#
# usage: state_dir_lock_test.sh COHORT
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cohort=$(readlink -f "$1")

cat > "$tmp/job.textproto" <<'SPEC'
name: "lock-test"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: [100] } }
batch_size: 32
epochs: 1
optimizer { kind: SGD lr: 0.05 }
cluster { min_workers: 1 max_workers: 1 join_timeout_ms: 600000 }
SPEC
state="$tmp/state"
port1=$(free_port)
"$cohort" coordinator --job="$tmp/job.textproto" --listen="127.0.0.1:$port1" \
  --state-dir="$state" > "$tmp/first.log" 2>&1 &
first=$!
pids+=("$first")
wait_for 20 "$cohort" status --coordinator="127.0.0.1:$port1" \
  || fail "the first coordinator did not start"

port2=$(free_port)
out=$(timeout 30 "$cohort" coordinator --job="$tmp/job.textproto" \
  --listen="127.0.0.1:$port2" --state-dir="$state" 2>&1)
rc=$?
if [[ $rc == 2 ]] && grep -q "pid $first" <<< "$out" &&
   grep -q "127.0.0.1:$port1" <<< "$out"; then
  ok "a second coordinator on the same --state-dir exits 2 naming the holder"
else
  fail "second coordinator (exit $rc): $out"
fi
kill -0 "$first" 2>/dev/null && ok "the first coordinator is still running" \
  || fail "the first coordinator died"

kill -9 "$first"
wait "$first" 2>/dev/null
port3=$(free_port)
"$cohort" coordinator --job="$tmp/job.textproto" --listen="127.0.0.1:$port3" \
  --state-dir="$state" > "$tmp/third.log" 2>&1 &
third=$!
pids+=("$third")
if wait_for 20 "$cohort" status --coordinator="127.0.0.1:$port3"; then
  ok "after kill -9, a restarted coordinator takes the directory over"
else
  fail "restart after kill -9: $(tail -3 "$tmp/third.log")"
fi
kill "$third" 2>/dev/null
finish
