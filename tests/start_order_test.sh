#!/usr/bin/env bash
# Start order does not matter: workers started 0, 1.5 and 5 s before their
# coordinator join within a few seconds of it listening (about 0.3 s on an
# idle machine; the bound leaves room for a loaded one, and a channel left
# waiting for gRPC's next name resolution took 5 s or more). A worker
# waiting for the rendezvous when the job is stopped says the job was
# stopped, not that the coordinator cannot be reached.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
bound=3

job="$tmp/job.textproto"
cat > "$job" <<'SPEC'
name: "start-order"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 256 test_samples: 64 } }
batch_size: 32
epochs: 1
optimizer { lr: 0.05 }
SPEC

# Prefixes each line with the time it was read, in seconds.
stamp() { while IFS= read -r line; do echo "$(date +%s.%N) $line"; done; }

# start_after SECONDS: two workers, then the coordinator SECONDS later.
start_after() {
  local delay=$1 port addr coord w listen join worst
  port=$(free_port); addr="127.0.0.1:$port"
  for w in 0 1; do
    ("$cohort" worker --coordinator="$addr" 2>&1 | stamp) >"$tmp/w$w.log" &
    pids+=($!)
  done
  sleep "$delay"
  ("$cohort" coordinator --job="$job" --workers=2 --listen="$addr" 2>&1 | stamp) \
    >"$tmp/coord.log" & coord=$!; pids+=($coord)
  wait "$coord"
  wait
  listen=$(grep -m1 'serving on' "$tmp/coord.log" | cut -d' ' -f1)
  worst=$(grep -h 'joined 127' "$tmp/w0.log" "$tmp/w1.log" |
          awk -v l="${listen:-0}" '{d = $1 - l; if (d > m) m = d; n++}
                                   END {if (n == 2) printf "%.3f", m}')
  if [[ -z "$listen" || -z "$worst" ]]; then
    fail "workers $delay s early: no join: $(cat "$tmp/coord.log" "$tmp/w0.log" "$tmp/w1.log")"
  elif awk -v w="$worst" -v b="$bound" 'BEGIN {exit !(w < b)}'; then
    ok "workers started $delay s before the coordinator joined ${worst} s after it listened"
  else
    fail "workers started $delay s early joined ${worst} s after the coordinator listened (bound $bound s)"
  fi
}
start_after 0
start_after 1.5
start_after 5

# A worker waiting for a second one when the job is stopped.
port=$(free_port); addr="127.0.0.1:$port"
"$cohort" coordinator --job="$job" --workers=2 --listen="$addr" 2>"$tmp/stop.err" &
coord=$!; pids+=($coord)
"$cohort" worker --coordinator="$addr" --quiet >"$tmp/waiting.out" 2>&1 & w=$!; pids+=($w)
joined() { grep -q 'joined (1 of 2' "$tmp/stop.err"; }
if wait_for 30 joined; then
  "$cohort" stop --coordinator="$addr" >/dev/null 2>&1
  wait "$w"; rc=$?
  msg=$(cat "$tmp/waiting.out")
  if [[ $rc -ne 0 && "$msg" == *"the job ended (STOPPED"* && "$msg" != *"cannot reach"* ]]; then
    ok "the waiting worker says the job was stopped: $msg"
  else
    fail "the waiting worker (exit $rc): $msg"
  fi
else
  fail "the worker never joined: $(cat "$tmp/stop.err")"
fi
wait "$coord"

finish
