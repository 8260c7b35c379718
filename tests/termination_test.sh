#!/usr/bin/env bash
# SIGTERM (what Kubernetes sends before its grace period runs out): training
# stops after the step in flight with a final checkpoint, which verifies and
# from which the same command resumes; a second signal ends it at once.
#   1. cohort train, then the same command again to the end;
#   2. two workers of a job: rank 0 writes the final checkpoint and both
#      leave without failing anything themselves.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"

cat > "$tmp/long.textproto" <<SPEC
name: "terminate"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 4096 test_samples: 256 } }
batch_size: 32
epochs: 100000
optimizer { lr: 0.05 momentum: 0.9 }
checkpoint { dir: "$tmp/ckpt" every_steps: 1000000 }
SPEC

# 1. cohort train. The signal goes once an epoch is done (its progress
# line is out), not after a fixed pause: on a busy machine the start alone
# may take longer than any pause chosen on an idle one.
"$cohort" train --job="$tmp/long.textproto" > "$tmp/t1.out" 2> "$tmp/t1.err" &
p=$!; pids+=($p)
wait_for 60 grep -q "^epoch 1 done" "$tmp/t1.err" ||
  fail "cohort train did not finish an epoch within 60 s: $(head -3 "$tmp/t1.err")"
kill -TERM $p
wait $p; rc=$?
step=$(sed -n 's/.*stopped by a termination signal after step \([0-9]*\); final checkpoint in .*/\1/p' "$tmp/t1.err")
if [[ $rc -ne 0 && -n "$step" && "$step" -gt 0 ]] \
    && "$cohort" checkpoint verify "$tmp/ckpt" > "$tmp/verify.out" 2>&1 \
    && grep -q "ckpt-$(printf '%012d' "$step").cohort .* OK" "$tmp/verify.out"; then
  ok "cohort train stopped by SIGTERM after step $step with a final checkpoint that verifies"
else
  fail "cohort train SIGTERM: exit $rc, step '$step': $(cat "$tmp/t1.err" "$tmp/verify.out" 2>/dev/null)"
fi
# Resumed with a spec that ends two epochs (128 steps each) later: more
# epochs may be added on resume.
epochs=$(( ${step:-0} / 128 + 2 ))
sed "s/^epochs: 100000/epochs: $epochs/" "$tmp/long.textproto" > "$tmp/short.textproto"
if "$cohort" train --job="$tmp/short.textproto" > "$tmp/t2.out" 2> "$tmp/t2.err" \
    && grep -q "resuming from step $step " "$tmp/t2.err" \
    && grep -q "steps $(( epochs * 128 )) " "$tmp/t2.out"; then
  ok "the same command resumed from step $step and finished: $(cat "$tmp/t2.out")"
else
  fail "resume after SIGTERM: $(cat "$tmp/t2.out" "$tmp/t2.err")"
fi

# 2. Two workers of a job; the checkpoint directory is rank 0's.
rm -rf "$tmp/ckpt"
addr="127.0.0.1:$(free_port)"
printf 'cluster { min_workers: 2 max_workers: 2 }\n' >> "$tmp/long.textproto"
"$cohort" coordinator --job="$tmp/long.textproto" --listen="$addr" 2> "$tmp/c.err" &
c=$!; pids+=($c)
"$cohort" worker --coordinator="$addr" --min-step-ms=5 --quiet 2> "$tmp/w0.err" & w0=$!; pids+=($w0)
"$cohort" worker --coordinator="$addr" --min-step-ms=5 --quiet 2> "$tmp/w1.err" & w1=$!; pids+=($w1)
stepping() { "$cohort" status --coordinator="$addr" --json 2>/dev/null | grep -q '"step": "[1-9]'; }
if wait_for 30 stepping; then
  sleep 1
  # Rank 1 first, rank 0 a step (5 ms) later: the signals straddle a step
  # boundary about half the time, and then rank 1 is gone while rank 0 is
  # in the next step's all-reduce. Rank 0 must still stop cleanly, with its
  # final checkpoint of the last completed step.
  kill -TERM $w1; sleep 0.005; kill -TERM $w0
  wait $w0; rc0=$?
  wait $w1; rc1=$?
  final=$(grep -ho "stopped by a termination signal after step [0-9]*; final checkpoint in [^ ]*" "$tmp/w0.err" "$tmp/w1.err")
  if [[ $rc0 -ne 0 && $rc1 -ne 0 && -n "$final" ]] \
      && "$cohort" checkpoint verify "$tmp/ckpt" > "$tmp/verify2.out" 2>&1; then
    ok "workers stopped by SIGTERM; rank 0: $final; $(tail -1 "$tmp/verify2.out")"
  else
    fail "workers SIGTERM: exits $rc0/$rc1: $(cat "$tmp/w0.err" "$tmp/w1.err" "$tmp/verify2.out" 2>/dev/null)"
  fi
  if grep -q "job terminate FAILED: worker rank" "$tmp/c.err"; then
    fail "a stopped worker reported a failure: $(grep FAILED "$tmp/c.err")"
  else
    ok "no worker reported a failure to the coordinator"
  fi
else
  fail "the job never trained: $(cat "$tmp/c.err")"
fi
kill -9 $c 2>/dev/null

finish
