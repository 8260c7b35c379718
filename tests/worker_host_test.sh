#!/usr/bin/env bash
# A worker whose advertised host does not resolve used
# to crash inside Gloo (SIGSEGV, exit 139, no message) once its job formed,
# and a bracketed IPv6 --host crashed it too. Now: one line naming --host,
# exit 2, before joining; and --host=[::1] trains (where this machine has
# IPv6 loopback).
#
# usage: worker_host_test.sh COHORT
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cohort=$(readlink -f "$1")

cat > "$tmp/job.textproto" <<'SPEC'
name: "host-test"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: [100] train_samples: 512 test_samples: 128 } }
batch_size: 32
epochs: 1
optimizer { kind: SGD lr: 0.05 }
cluster { min_workers: 1 max_workers: 1 }
SPEC

# start_coordinator: sets $addr and $coord.
start_coordinator() {
  addr="127.0.0.1:$(free_port)"
  "$cohort" coordinator --job="$tmp/job.textproto" --listen="$addr" \
    > "$tmp/coordinator.log" 2>&1 &
  coord=$!
  pids+=("$coord")
  wait_for 20 "$cohort" status --coordinator="$addr" || fail "no coordinator"
}

start_coordinator
out=$(timeout 60 "$cohort" worker --coordinator="$addr" \
  --host=nosuchhost.invalid --devices=cpu:1 --quiet 2>&1)
rc=$?
if [[ $rc == 2 ]] && grep -q -- '--host="nosuchhost.invalid" does not resolve' <<< "$out"; then
  ok "an unresolvable --host: exit 2 naming it"
else
  fail "unresolvable --host (exit $rc): $out"
fi
"$cohort" status --coordinator="$addr" | grep -q 'RUNNING\|FORMING\|WAITING' \
  && ok "the job did not form around the refused worker" \
  || fail "job state after the refusal: $("$cohort" status --coordinator="$addr" 2>&1 | head -3)"
kill "$coord" 2>/dev/null
wait "$coord" 2>/dev/null

if /usr/bin/python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
  start_coordinator
  out=$(timeout 120 "$cohort" worker --coordinator="$addr" --host='[::1]' \
    --devices=cpu:1 --quiet 2>&1)
  rc=$?
  [[ $rc == 0 ]] && ok "--host=[::1] trains" || fail "--host=[::1] (exit $rc): $out"
  wait "$coord" 2>/dev/null
else
  echo "no IPv6 loopback here: the bracketed --host check is skipped"
fi
finish
