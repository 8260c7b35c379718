#!/usr/bin/env bash
# A coordinator with a job token checks it before it reads a request. 48
# concurrent 64 MiB KvSet calls without the token (each on its own
# connection, twice) are all refused with UNAUTHENTICATED, and the
# coordinator's memory afterwards stays within 100 MB of its baseline
# (without the early check: 23 MB -> about 900 MB, ratcheting up each
# round). 48 concurrent 64 MiB server reflection calls without the token
# are refused before gRPC's reflection service reads them, and the health
# service, open without the token, answers 48 concurrent 64 MiB
# Health/Check calls on the main port and on --health-listen without
# reading them: each of these floods keeps the coordinator's peak and final
# RSS within 40 MB of what it was before it (gRPC's own reflection and
# health services read such requests whole: gigabytes, and hundreds of MB
# even where the receive limit refuses them). An authenticated 64 MiB KvSet
# and KvGet still round-trip. A parameter-server shard refuses 48
# concurrent 64 MiB Pulls without the token, twice, within 20 MB of its
# RSS before them (with HTTP/2 BDP probing on: +58 MB, then +33 MB more).
#
# usage: auth_flood_test.sh COHORT AUTH_FLOOD_PY
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cohort=$(readlink -f "$1")
flood=$(readlink -f "$2")

cat > "$tmp/job.textproto" <<'SPEC'
name: "auth-flood"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: [100] } }
batch_size: 32
epochs: 1
optimizer { kind: SGD lr: 0.05 }
cluster { min_workers: 2 max_workers: 2 join_timeout_ms: 600000 }
SPEC
head -c 24 /dev/urandom | base64 | tr -d '=+/' > "$tmp/token"
addr="127.0.0.1:$(free_port)"
health_addr="127.0.0.1:$(free_port)"
"$cohort" coordinator --job="$tmp/job.textproto" --listen="$addr" \
  --token-file="$tmp/token" --health-listen="$health_addr" \
  > "$tmp/coordinator.log" 2>&1 &
coordinator=$!
pids+=("$coordinator")
if ! wait_for 20 "$cohort" status --coordinator="$addr" \
    --token-file="$tmp/token"; then
  fail "the coordinator did not start: $(tail -3 "$tmp/coordinator.log")"
  finish
  exit
fi

out=$(timeout 600 /usr/bin/python3 "$flood" "$addr" "$coordinator" \
  "$tmp/token" --calls 48 --mib 64 --rounds 2 --limit-mb 100 \
  --health-addr "$health_addr" --health-limit-mb 40 2>&1)
rc=$?
echo "$out"
if [[ $rc -eq 0 ]]; then
  ok "48 unauthenticated 64 MiB KvSets, twice, and reflection calls: refused; as many 64 MiB health checks on each health port: answered unread; memory near baseline throughout; an authenticated 64 MiB value round-trips"
else
  fail "auth_flood.py (exit $rc): $(grep FAIL <<< "$out" | head -3)"
fi
kill -0 "$coordinator" 2>/dev/null && ok "the coordinator still runs" \
  || fail "the coordinator died: $(tail -3 "$tmp/coordinator.log")"
kill "$coordinator"

# A parameter-server shard: 48 unauthenticated 64 MiB Pulls, twice.
sed -e 's/name: "auth-flood"/name: "auth-flood-ps"\nmode: PS\nps { shards: 1 }/' \
  "$tmp/job.textproto" > "$tmp/ps.textproto"
ps_coordinator_addr="127.0.0.1:$(free_port)"
shard_addr="127.0.0.1:$(free_port)"
"$cohort" coordinator --job="$tmp/ps.textproto" \
  --listen="$ps_coordinator_addr" --token-file="$tmp/token" \
  > "$tmp/ps_coordinator.log" 2>&1 &
pids+=($!)
"$cohort" ps --coordinator="$ps_coordinator_addr" --listen="$shard_addr" \
  --token-file="$tmp/token" > "$tmp/shard.log" 2>&1 &
shard=$!
pids+=("$shard")
if wait_for 20 grep -q "serving at" "$tmp/shard.log"; then
  out=$(timeout 600 /usr/bin/python3 "$flood" --shard "$shard_addr" \
    "$shard" "$tmp/token" --calls 48 --mib 64 --rounds 2 --limit-mb 20 2>&1)
  rc=$?
  echo "$out"
  [[ $rc -eq 0 ]] && ok "48 unauthenticated 64 MiB Pulls at a shard, twice: refused; its memory near baseline" \
    || fail "auth_flood.py --shard (exit $rc): $(grep FAIL <<< "$out" | head -3)"
else
  fail "the shard did not start: $(tail -3 "$tmp/shard.log")"
fi
finish
