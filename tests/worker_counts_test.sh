#!/usr/bin/env bash
# A cluster started by hand trains on as many workers as it is told: the
# README's coordinator and worker commands with --workers=2 form a world of
# 2 (the report and cohort status say so); a worker over the maximum is
# refused with a message naming the flag to raise, and the coordinator's
# log and status say it refused one. `cohort local` shows every worker's
# resume line.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"

job="$tmp/job.textproto"
cat > "$job" <<'SPEC'
name: "two-workers"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 4096 test_samples: 256 } }
batch_size: 32
epochs: 400
optimizer { lr: 0.05 momentum: 0.9 }
SPEC
running() { "$cohort" status --coordinator="$addr" | grep -q 'RUNNING'; }

# 1. coordinator --workers=2 and two workers, as the README starts them.
# First a job long enough (hours) that cohort status sees both workers
# however fast the machine is; cohort stop ends it.
long="$tmp/long.textproto"
sed 's/^epochs: 400/epochs: 100000/' "$job" > "$long"
port=$(free_port); addr="127.0.0.1:$port"
"$cohort" coordinator --job="$long" --workers=2 --listen="$addr" 2>"$tmp/long.err" & coord=$!
pids+=($coord)
for i in 0 1; do "$cohort" worker --coordinator="$addr" --quiet >/dev/null 2>&1 & pids+=($!); done
if wait_for 60 running; then
  st=$("$cohort" status --coordinator="$addr")
  [[ "$st" == *"world size 2"* ]] && ok "status: world size 2" || fail "status: $st"
  "$cohort" stop --coordinator="$addr" >/dev/null
else
  fail "the job never ran: $(cat "$tmp/long.err")"
fi
wait $coord 2>/dev/null

# Then one that ends by itself (with the training flags a worker takes:
# rank 0 alone exports).
port=$(free_port); addr="127.0.0.1:$port"
"$cohort" coordinator --job="$job" --workers=2 --listen="$addr" --report="$tmp/report.json" \
  2>"$tmp/coord.err" & coord=$!; pids+=($coord)
for i in 0 1; do
  "$cohort" worker --coordinator="$addr" --max-steps=200 --export="$tmp/two.onnx" --quiet \
    >"$tmp/w$i.out" 2>"$tmp/w$i.err" &
  pids+=($!)
  [[ $i == 0 ]] && w0=$! || w1=$!
done
wait $w0; rc0=$?; wait $w1; rc1=$?; wait $coord; rcc=$?
if [[ $rc0 -eq 0 && $rc1 -eq 0 && $rcc -eq 0 ]] && grep -q '"world_size": 2' "$tmp/report.json" \
    && grep -q 'for 2 workers (from the flags)' "$tmp/coord.err" && [[ -s "$tmp/two.onnx" ]] \
    && [[ $(grep -l '^wrote .*two.onnx' "$tmp/w0.out" "$tmp/w1.out" | wc -l) == 1 ]]; then
  ok "coordinator --workers=2: the report's world size is 2; rank 0 alone exported the model"
else
  fail "coordinator --workers=2: exits $rcc/$rc0/$rc1: $(cat "$tmp/coord.err" "$tmp/w0.err" "$tmp/w1.err")"
fi

# 2. The spec's default of one worker, and a second worker: refused, and
# everyone is told which setting to raise. The long job is still running
# when the second worker knocks, however fast the machine.
port=$(free_port); addr="127.0.0.1:$port"
"$cohort" coordinator --job="$long" --listen="$addr" 2>"$tmp/one.err" & coord=$!; pids+=($coord)
"$cohort" worker --coordinator="$addr" --quiet 2>/dev/null & w0=$!; pids+=($w0)
if wait_for 30 running; then
  err=$("$cohort" worker --coordinator="$addr" --quiet 2>&1 >/dev/null)
  if [[ $? -ne 0 && "$err" == *"maximum of 1 workers"* && "$err" == *"--workers=N or --max-workers=N"* \
      && "$err" == *"cluster.max_workers"* ]]; then
    ok "the worker too many is told the flag: $err"
  else
    fail "the worker too many: $err"
  fi
  st=$("$cohort" status --coordinator="$addr")
  [[ "$st" == *"refused workers: 1 (the last: "*"cannot join"* ]] \
    && ok "status: $(grep 'refused workers' <<< "$st")" || fail "status after a refusal: $st"
  grep -q 'W .*refused worker .*--max-workers' "$tmp/one.err" \
    && ok "the coordinator's log: $(grep 'refused worker' "$tmp/one.err")" \
    || fail "no warning in the coordinator's log: $(cat "$tmp/one.err")"
  grep -q 'for 1 worker (the default; --workers=N for more)' "$tmp/one.err" \
    && ok "the coordinator says how many it waits for" || fail "start line: $(cat "$tmp/one.err")"
  "$cohort" stop --coordinator="$addr" >/dev/null
else
  fail "the one-worker job never ran: $(cat "$tmp/one.err")"
fi
wait $coord 2>/dev/null; kill $w0 2>/dev/null

# 3. cohort local: every worker's resume line.
small="$tmp/small.textproto"
sed 's/^epochs: 400/epochs: 2/' "$job" > "$small"
"$cohort" local --job="$small" --workers=2 --checkpoint-dir="$tmp/ck" --max-steps=10 \
  > "$tmp/l1.out" 2>&1 || fail "local, first part: $(tail -3 "$tmp/l1.out")"
"$cohort" local --job="$small" --workers=2 --checkpoint-dir="$tmp/ck" > "$tmp/l2.out" 2>&1 \
  || fail "local, resumed: $(tail -3 "$tmp/l2.out")"
if grep -q 'rank 0 resuming from step 10' "$tmp/l2.out" && grep -q 'rank 1 resuming from step 10' "$tmp/l2.out"; then
  ok "cohort local shows each worker's resume line"
else
  fail "cohort local's resume lines: $(cat "$tmp/l2.out")"
fi

finish
