#!/usr/bin/env bash
# Parameter-server mode with real processes over loopback: cohort local in
# each consistency model, a coordinator + shard + two workers started by
# hand with the shards visible in `cohort status`, and a shard killed with
# SIGKILL (the workers must fail within their RPC deadline naming the shard,
# and the job must end FAILED with the reason).
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"

spec() {  # spec CONSISTENCY EPOCHS
  cat <<SPEC
name: "ps-mlp"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 4096 test_samples: 1024 } }
batch_size: 32
epochs: $2
optimizer { lr: 0.05 momentum: 0.9 }
mode: PS
ps { consistency: $1 shards: 2 rpc_timeout_ms: 3000 }
cluster { heartbeat_interval_ms: 300 heartbeat_misses: 3 min_workers: 2 }
SPEC
}

# 1. cohort local in every consistency model, 2 workers and 2 shards.
for c in SYNC SSP ASYNC; do
  spec "$c" 2 > "$tmp/$c.textproto"
  if out=$("$cohort" local --job="$tmp/$c.textproto" --workers=2 --report="$tmp/$c.json" 2>"$tmp/$c.err"); then
    acc=$(/usr/bin/python3 -c "import json; print(json.load(open('$tmp/$c.json'))['test_accuracy'])")
    if [[ "$out" == *"result: workers 2"* ]] && /usr/bin/python3 -c "import sys; sys.exit(0 if $acc >= 0.9 else 1)"; then
      ok "PS $c: $out"
    else
      fail "PS $c: accuracy $acc, output $out"
    fi
  else
    fail "PS $c failed: $(tail -3 "$tmp/$c.err")"
  fi
done

# 2. By hand: coordinator, one shard, two workers; then kill -9 the shard.
spec SSP 400 | sed 's/shards: 2/shards: 1/' > "$tmp/long.textproto"
addr="127.0.0.1:$(free_port)"
"$cohort" coordinator --job="$tmp/long.textproto" --listen="$addr" 2>"$tmp/coord.err" &
coord=$!; pids+=($coord)
"$cohort" ps --coordinator="$addr" --listen=127.0.0.1:0 2>"$tmp/ps.err" & shard=$!; pids+=($shard)
"$cohort" worker --coordinator="$addr" --quiet 2>"$tmp/w0.err" & w0=$!; pids+=($w0)
"$cohort" worker --coordinator="$addr" --quiet 2>"$tmp/w1.err" & w1=$!; pids+=($w1)
running() { "$cohort" status --coordinator="$addr" | grep -q 'RUNNING'; }
# The shard's row: INDEX ADDRESS AGE PARTS PARAMS PUSH/S PULL/S VERSION ...
pushing() { "$cohort" status --coordinator="$addr" | awk '$1 == "0" && $2 ~ /^127\.0\.0\.1:/ && $8 > 0 { found = 1 } END { exit !found }'; }
if wait_for 30 running && wait_for 10 pushing; then
  st=$("$cohort" status --coordinator="$addr")
  if echo "$st" | grep -q '^SHARD' && echo "$st" | grep -qE '^0 +127\.0\.0\.1:'; then
    ok "status shows the shard and its partitions"
  else
    fail "status without the shard: $st"
  fi
  kill -9 "$shard"
  killed=$SECONDS
  wait "$w0"; rc0=$?
  wait "$w1"; rc1=$?
  took=$((SECONDS - killed))
  if [[ $rc0 -ne 0 && $rc1 -ne 0 && $took -le 8 ]]; then
    ok "both workers failed ${took}s after the shard died (rpc_timeout 3s)"
  else
    fail "workers after kill -9 of the shard: exit $rc0 and $rc1 after ${took}s"
  fi
  if grep -q "shard 0 at 127.0.0.1:" "$tmp/w0.err" "$tmp/w1.err"; then
    ok "a worker's error names the shard: $(grep -h -m1 'shard 0 at' "$tmp/w0.err" "$tmp/w1.err" | head -1)"
  else
    fail "worker errors do not name the shard: $(cat "$tmp/w0.err" "$tmp/w1.err")"
  fi
  wait "$coord"; rcc=$?
  if [[ $rcc -ne 0 ]] && grep -q "FAILED" "$tmp/coord.err" && grep -q "shard" "$tmp/coord.err"; then
    ok "job FAILED: $(grep FAILED "$tmp/coord.err" | tail -1)"
  else
    fail "coordinator after the shard died: exit $rcc, $(tail -2 "$tmp/coord.err")"
  fi
else
  fail "the PS job never ran: $("$cohort" status --coordinator="$addr" 2>&1) $(tail -2 "$tmp/coord.err" "$tmp/ps.err" "$tmp/w0.err")"
fi

# 3. Bad input.
spec SYNC 1 > "$tmp/ar.textproto"
sed -i '/^mode: PS/d; /^ps {/d' "$tmp/ar.textproto"
if out=$("$cohort" local --job="$tmp/ar.textproto" --shards=2 2>&1); then
  fail "--shards with an all-reduce job was accepted"
elif [[ "$out" == *"--shards needs a job with \`mode: PS\`"* ]]; then
  ok "--shards with an all-reduce job: $out"
else
  fail "--shards with an all-reduce job: $out"
fi
printf 'mode: PS\nps { consistency: SYNC staleness: 2 }\n' >> "$tmp/ar.textproto"
if out=$("$cohort" local --job="$tmp/ar.textproto" 2>&1); then
  fail "staleness with SYNC was accepted"
elif [[ "$out" == *"staleness"* && "$out" == *"ar.textproto"* ]]; then
  ok "staleness with SYNC: $out"
else
  fail "staleness with SYNC: $out"
fi

finish
