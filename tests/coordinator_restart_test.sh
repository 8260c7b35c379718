#!/usr/bin/env bash
# A durable coordinator (--state-dir) killed with SIGKILL mid-job and
# restarted on the same directory: the two workers train on through its
# absence, the job ends SUCCEEDED with every epoch done, and the restarted
# coordinator kept the generation, the workers and the epoch numbers.
# Also: a state dir of another job is refused, naming it.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"

status_json() { "$cohort" status --coordinator="$addr" --json --timeout=2; }
field() { /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin).get('$1', 0))"; }

# Slowed workers (--min-step-ms, about 0.9 s an epoch here) keep the job
# running for about 9 s: the coordinator is killed in the first or second
# epoch and is back within about 3 s, so the job cannot end without it even
# on a busy machine (where the workers slow down too).
job="$tmp/job.textproto"
cat > "$job" <<'SPEC'
name: "durable"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 2048 test_samples: 256 } }
batch_size: 32
epochs: 10
optimizer { lr: 0.05 momentum: 0.9 }
cluster { min_workers: 2 heartbeat_interval_ms: 200 heartbeat_misses: 3
          coordinator_grace_ms: 20000 }
SPEC
addr="127.0.0.1:$(free_port)"
state="$tmp/state"
start_coordinator() {
  "$cohort" coordinator --job="$job" --listen="$addr" --state-dir="$state" \
      --report="$tmp/report.json" >>"$tmp/coordinator.log" 2>&1 &
  coordinator=$!
  pids+=("$coordinator")
}
start_coordinator
for i in 0 1; do
  "$cohort" worker --coordinator="$addr" --quiet --min-step-ms=30 \
      >"$tmp/worker$i.log" 2>&1 &
  workers[$i]=$!
  pids+=("${workers[$i]}")
done

if ! wait_for 30 bash -c "[[ \$($cohort status --coordinator=$addr --json --timeout=2 | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get(\"step\", 0))') -ge 40 ]]"; then
  fail "the job did not start training"
fi
before=$(status_json)
gen_before=$(echo "$before" | field generation)
epoch_before=$(echo "$before" | field epoch)
kill -9 "$coordinator"
wait "$coordinator" 2>/dev/null
sleep 2  # the workers train on without it
start_coordinator
# The restarted coordinator's first answer, kept: a second query could
# come after the job ended and the coordinator with it.
restarted_status() { after=$(status_json 2>/dev/null); }
after=""
if wait_for 10 restarted_status; then
  gen_after=$(echo "$after" | field generation)
  epoch_after=$(echo "$after" | field epoch)
  state_after=$(echo "$after" | field state)
  if [[ "$gen_after" == "$gen_before" && "$epoch_after" -ge "$epoch_before" && "$state_after" == "RUNNING" ]]; then
    ok "restarted coordinator carries on: generation $gen_after, epoch $epoch_before -> $epoch_after, $state_after"
  else
    fail "after restart: generation $gen_before -> $gen_after, epoch $epoch_before -> $epoch_after, state $state_after"
  fi
else
  fail "the restarted coordinator does not answer"
fi
for i in 0 1; do
  if wait "${workers[$i]}"; then
    ok "worker $i finished"
  else
    fail "worker $i failed: $(tail -3 "$tmp/worker$i.log")"
  fi
done
if wait "$coordinator"; then
  if grep -q '"state": "SUCCEEDED"' "$tmp/report.json" &&
     grep -q '"epochs": 10' "$tmp/report.json"; then
    ok "job SUCCEEDED with all 10 epochs"
  else
    fail "report: $(cat "$tmp/report.json")"
  fi
else
  fail "coordinator exit status $?: $(tail -5 "$tmp/coordinator.log")"
fi

# Another job on the same state dir is refused.
other="$tmp/other.textproto"
sed 's/name: "durable"/name: "other"/' "$job" > "$other"
if out=$("$cohort" coordinator --job="$other" --listen="127.0.0.1:$(free_port)" --state-dir="$state" 2>&1); then
  fail "another job's state dir was accepted"
elif [[ "$out" == *"another job"* && "$out" == *"$state"* ]]; then
  ok "another job's state dir refused: $out"
else
  fail "unexpected refusal: $out"
fi

finish
