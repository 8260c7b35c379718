#!/usr/bin/env bash
# Elastic recovery with real processes over loopback (cluster.max_restarts):
#   1. kill -9 of one of three workers: the survivors regroup as generation
#      2 and go on; a replacement grows the world back to 3; the job
#      succeeds. Detection, recovery and steps lost are printed.
#   2. SIGSTOP of a worker: it is declared dead after the heartbeat bound,
#      the survivors leave their collective at once and go on; after
#      SIGCONT the stopped worker is fenced out of its generation and
#      joins the job anew.
#   3. The restart budget: a second failure past max_restarts fails the job
#      naming the budget.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"

now() { date +%s.%N; }
# status ADDR PYTHON-EXPRESSION: evaluates the expression over the
# coordinator's StatusResponse (`s`, proto3 JSON) and prints it.
status() {
  "$cohort" status --coordinator="$1" --json --timeout=2 2>/dev/null |
    /usr/bin/python3 -c "import json,sys; s=json.load(sys.stdin); print($2)" 2>/dev/null
}
# The last generation record as "generation world restarts regrouping".
generation_of() { status "$1" '"%s %s %s %s" % (s["generation"], s["worldSize"], s["restarts"], s["regrouping"])'; }
record() { status "$1" "[g for g in s['generations'] if int(g['generation']) == $2][0]['$3']"; }

# Heartbeats every 300 ms, dead after 3 misses: a silent worker is declared
# dead 0.9 s after its last heartbeat (checked every 100 ms).
spec="$tmp/elastic.textproto"
cat > "$spec" <<'SPEC'
name: "elastic-mlp"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 4096 test_samples: 1024 } }
batch_size: 32
epochs: 6
optimizer { lr: 0.05 momentum: 0.9 }
cluster { min_workers: 2 max_workers: 3 heartbeat_interval_ms: 300
          heartbeat_misses: 3 collective_timeout_ms: 4000 max_restarts: 2
          last_call_ms: 10000 }
SPEC

start_job() {  # start_job SPEC NAME WORKERS [worker flags]: sets addr, coord, w[]
  local job="$1" name="$2" n="$3"
  shift 3
  addr="127.0.0.1:$(free_port)"
  "$cohort" coordinator --job="$job" --listen="$addr" --report="$tmp/$name.json" \
    2>"$tmp/$name.coord.err" &
  coord=$!; pids+=($coord)
  w=()
  for i in $(seq 0 $((n - 1))); do
    "$cohort" worker --coordinator="$addr" "$@" 2>"$tmp/$name.w$i.err" &
    w+=($!); pids+=($!)
  done
}
running_gen() { [[ "$(generation_of "$addr")" == "$1 "*" False" ]]; }
stepping() {  # stepping GEN: a member reported a step trained in GEN
  [[ "$(record "$addr" "$1" firstStepUnixS)" != "0" ]]
}

# 1. kill -9, then a replacement. 6 epochs of 43 steps at >= 40 ms a step:
# about 10 s of training, so the job is still running after both events.
start_job "$spec" kill 3 --min-step-ms=40
if wait_for 30 running_gen 1 && wait_for 10 stepping 1; then
  sleep 1
  kill -9 "${w[2]}"
  t0=$(now)
  if wait_for 20 running_gen 2 && wait_for 30 stepping 2; then
    started=$(record "$addr" 2 regroupStartedUnixS)
    first=$(record "$addr" 2 firstStepUnixS)
    prev=$(record "$addr" 2 previousStep)
    restored=$(record "$addr" 2 restoredStep)
    world=$(status "$addr" 's["worldSize"]')
    detect=$(awk -v a="$t0" -v b="$started" 'BEGIN { printf "%.2f", b - a }')
    recover=$(awk -v a="$t0" -v b="$first" 'BEGIN { printf "%.2f", b - a }')
    lost=$(( prev > restored ? prev - restored : 0 ))
    echo "kill -9: detected after ${detect}s, training again after ${recover}s, world $world, restored step $restored (newest reported $prev, lost $lost)"
    if [[ "$world" == 2 ]] && awk -v d="$detect" -v r="$recover" 'BEGIN { exit !(d <= 1.5 && r <= 30) }'; then
      ok "killed worker: generation 2 of 2 workers, detected in ${detect}s (bound 0.9s + polling), training in ${recover}s"
    else
      fail "killed worker: world '$world', detected ${detect}s, recovered ${recover}s: $(cat "$tmp/kill.coord.err")"
    fi
  else
    fail "no generation 2 after the kill: $(generation_of "$addr"); $(tail -5 "$tmp/kill.coord.err")"
  fi
  "$cohort" worker --coordinator="$addr" --min-step-ms=40 2>"$tmp/kill.w3.err" & w3=$!; pids+=($w3)
  if wait_for 30 running_gen 3 && [[ "$(status "$addr" 's["worldSize"]')" == 3 ]]; then
    ok "replacement joined: generation 3 has 3 workers ($(record "$addr" 3 cause))"
  else
    fail "replacement: $(generation_of "$addr"); $(tail -5 "$tmp/kill.coord.err")"
  fi
  wait "$coord"; rcc=$?
  rcs=0
  for p in "${w[0]}" "${w[1]}" "$w3"; do wait "$p" || rcs=$?; done
  acc=$(sed -n 's/^  "test_accuracy": \([0-9.]*\),*$/\1/p' "$tmp/kill.json")
  if [[ $rcc -eq 0 && $rcs -eq 0 ]] && grep -q SUCCEEDED "$tmp/kill.json" \
      && awk -v a="$acc" 'BEGIN { exit !(a >= 0.9) }'; then
    ok "job with a kill and a replacement succeeded: test accuracy $acc"
  else
    fail "job after kill: coordinator $rcc, workers $rcs, accuracy '$acc': $(cat "$tmp/kill.coord.err")"
  fi
else
  fail "kill test never ran: $(cat "$tmp/kill.coord.err")"
fi

# 2. SIGSTOP: declared dead after 0.9 s; survivors leave their collective
# within collective_timeout_ms (4 s).
start_job "$spec" stop 3 --min-step-ms=40
if wait_for 30 running_gen 1 && wait_for 10 stepping 1; then
  sleep 1
  kill -STOP "${w[1]}"
  t0=$(now)
  if wait_for 30 running_gen 2 && wait_for 30 stepping 2; then
    first=$(record "$addr" 2 firstStepUnixS)
    silent=$(record "$addr" 2 silentS)
    recover=$(awk -v a="$t0" -v b="$first" 'BEGIN { printf "%.2f", b - a }')
    echo "SIGSTOP: declared dead after ${silent}s of silence, training again after ${recover}s"
    if awk -v r="$recover" 'BEGIN { exit !(r <= 4 + 0.9 + 5) }'; then
      ok "stopped worker: survivors training again in ${recover}s (collective timeout 4s)"
    else
      fail "stopped worker: recovery took ${recover}s: $(cat "$tmp/stop.coord.err")"
    fi
  else
    fail "no generation 2 after SIGSTOP: $(generation_of "$addr"); $(tail -5 "$tmp/stop.coord.err")"
  fi
  kill -CONT "${w[1]}"
  wait "${w[1]}"; rcf=$?
  # Fenced out of generation 1, it joins the job anew (a
  # worker declared dead that comes back is a replacement, not a casualty).
  if [[ $rcf -eq 0 ]] && grep -q "dropped from the job\|generation 1 is over" "$tmp/stop.w1.err" \
      && grep -q "rejoined .* (generation [3-9]" "$tmp/stop.w1.err"; then
    ok "the stopped worker, continued, left generation 1 and rejoined: $(grep "rejoined" "$tmp/stop.w1.err" | tail -1)"
  else
    fail "fencing: exit $rcf: $(cat "$tmp/stop.w1.err")"
  fi
  wait "$coord"; rcc=$?
  if [[ $rcc -eq 0 ]] && grep -q SUCCEEDED "$tmp/stop.json"; then
    ok "job with a stopped worker succeeded"
  else
    fail "job after SIGSTOP: coordinator exit $rcc: $(cat "$tmp/stop.coord.err")"
  fi
else
  fail "stop test never ran: $(cat "$tmp/stop.coord.err")"
fi

# 3. The budget: max_restarts 1, min_workers 1; the second failure ends it.
budget="$tmp/budget.textproto"
sed -e 's/max_restarts: 2/max_restarts: 1/' -e 's/min_workers: 2/min_workers: 1/' \
  -e 's/^epochs: 6/epochs: 100/' "$spec" > "$budget"
start_job "$budget" budget 3 --min-step-ms=40
if wait_for 30 running_gen 1 && wait_for 10 stepping 1; then
  kill -9 "${w[2]}"
  wait_for 20 running_gen 2 || fail "budget: no generation 2: $(generation_of "$addr")"
  kill -9 "${w[1]}"
  wait "$coord"; rcc=$?
  wait "${w[0]}"; rc0=$?
  if [[ $rcc -ne 0 && $rc0 -ne 0 ]] && grep -q "FAILED.*max_restarts = 1" "$tmp/budget.coord.err"; then
    ok "restart budget: $(grep -o 'FAILED.*' "$tmp/budget.coord.err" | tail -1)"
  else
    fail "budget: coordinator $rcc, survivor $rc0: $(cat "$tmp/budget.coord.err")"
  fi
else
  fail "budget test never ran: $(cat "$tmp/budget.coord.err")"
fi

finish
