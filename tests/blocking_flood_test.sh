#!/usr/bin/env bash
# A flood of blocking calls must not starve heartbeats, nor keep a forming
# job's workers from joining. A client holds 8,000 concurrent KvWait calls
# at the coordinator (over 16 connections, each call sent again as soon as
# it ends: 16 x 32 per connection is more than the coordinator's total of
# 264) while a 2-worker job with 500 ms heartbeats forms and trains for
# about 10 s. The excess calls are refused at once with RESOURCE_EXHAUSTED
# (counted and printed; some at the total), the workers join (the total
# keeps a share for them), the job ends SUCCEEDED with no worker declared
# dead and no restart, and the largest heartbeat age seen in the
# coordinator's status is printed. Without the bound the coordinator ran
# 8,000 threads contending for one lock and declared both workers dead
# within seconds; without the share, once the flood filled the total, a
# worker's Join was refused and the worker gave up.
#
# usage: blocking_flood_test.sh COHORT BLOCKING_FLOOD_PY
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cohort=$(readlink -f "$1")
flood=$(readlink -f "$2")

# The coordinator runs a thread per admitted call and the flood's
# connections need descriptors: take the hard limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null
echo "open files limit: $(ulimit -n)"

cat > "$tmp/job.textproto" <<'SPEC'
name: "blocking-flood"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: [100] train_samples: 2048 test_samples: 256 } }
batch_size: 32
epochs: 6
optimizer { kind: SGD lr: 0.05 }
cluster { min_workers: 2 max_workers: 2 heartbeat_interval_ms: 500 heartbeat_misses: 3 }
SPEC
addr="127.0.0.1:$(free_port)"
"$cohort" coordinator --job="$tmp/job.textproto" --listen="$addr" \
  --report="$tmp/report.json" > "$tmp/coordinator.log" 2>&1 &
coordinator=$!
pids+=("$coordinator")
wait_for 20 "$cohort" status --coordinator="$addr" \
  || fail "the coordinator did not start: $(tail -3 "$tmp/coordinator.log")"

/usr/bin/python3 "$flood" "$addr" --calls 8000 --channels 16 --seconds 50 \
  --until-done > "$tmp/flood.out" 2>&1 &
flood_pid=$!
pids+=("$flood_pid")
# The flood is in place once the coordinator refuses some of it.
if wait_for 15 grep -q "refused" "$tmp/coordinator.log"; then
  ok "the flood is in place: $(grep -m1 refused "$tmp/coordinator.log" | cut -c1-200)"
else
  echo "note: no refusal logged after 15 s; starting the workers anyway"
fi
echo "coordinator threads: $(ls /proc/$coordinator/task 2>/dev/null | wc -l)"

start=$SECONDS
for w in 0 1; do
  "$cohort" worker --coordinator="$addr" --min-step-ms=50 --quiet \
    > "$tmp/worker$w.log" 2>&1 &
  workers[$w]=$!
  pids+=("${workers[$w]}")
done
for w in 0 1; do
  if timeout 60 tail --pid="${workers[$w]}" -f /dev/null; then
    wait "${workers[$w]}"
    rc=$?
    [[ $rc -eq 0 ]] && ok "worker $w finished" \
      || fail "worker $w exit $rc: $(tail -3 "$tmp/worker$w.log")"
  else
    fail "worker $w still runs after 60 s"
  fi
done
echo "training took $((SECONDS - start)) s"
timeout 20 tail --pid="$coordinator" -f /dev/null
timeout 20 tail --pid="$flood_pid" -f /dev/null
cat "$tmp/flood.out"

state=$(sed -n 's/^ *"state": "\([A-Z]*\)".*/\1/p' "$tmp/report.json" 2>/dev/null)
[[ "$state" == SUCCEEDED ]] && ok "the job SUCCEEDED" \
  || fail "the job ended ${state:-without a report}: $(grep -m3 -E 'FAILED|missed' "$tmp/coordinator.log")"
dead=$(grep -cE "missed heartbeats|restart [0-9]+ of" "$tmp/coordinator.log")
if [[ $dead -eq 0 ]]; then
  ok "no worker was declared dead, no restart"
else
  fail "$dead workers declared dead or restarts: $(grep -m3 -E 'missed heartbeats|restart' "$tmp/coordinator.log")"
fi
summary=$(grep -m1 "^flood:" "$tmp/flood.out")
refused=$(sed -n 's/.*refused RESOURCE_EXHAUSTED \([0-9]*\) .*/\1/p' <<< "$summary")
at_total=$(sed -n 's/.*(at the total \([0-9]*\));.*/\1/p' <<< "$summary")
sent=$(sed -n 's/.*, sent \([0-9]*\);.*/\1/p' <<< "$summary")
age=$(sed -n 's/.*heartbeat age max \([0-9.]*\)s.*/\1/p' <<< "$summary")
if [[ -n "$refused" && $refused -gt 0 && -n "$sent" && $sent -ge 8000 ]]; then
  ok "the flood sent $sent KvWait calls; $refused refused with RESOURCE_EXHAUSTED: $(grep -m1 'first refusal' "$tmp/flood.out" | cut -c8-)"
else
  fail "the flood: ${summary:-no summary}"
fi
if [[ -n "$at_total" && $at_total -gt 0 ]]; then
  ok "the flood reached the coordinator's total: $at_total calls refused there, and still the workers joined"
else
  fail "the flood never reached the coordinator's total (over 16 connections): ${summary:-no summary}"
fi
if [[ "$summary" != *"no workers"* && -n "$age" ]] &&
   awk -v a="$age" 'BEGIN { exit !(a < 1.5) }'; then
  ok "largest heartbeat age seen during the flood: ${age} s (the bound is 1.5 s)"
else
  fail "heartbeat age during the flood: ${age:-unknown} s (the bound is 1.5 s)"
fi
finish
