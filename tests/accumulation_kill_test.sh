#!/usr/bin/env bash
# Gradient accumulation and clipping survive kill -9. A job that
# accumulates 3 batches a step (each epoch ending on a shorter step) and
# clips by value and by norm is killed with SIGKILL after a checkpoint and
# started again; its final model is byte for byte the model of the same job
# run undisturbed.
#
# usage: accumulation_kill_test.sh COHORT
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cohort=$(readlink -f "$1")

cat > "$tmp/job.textproto" <<'SPEC'
name: "accumulate-kill"
model { zoo: "lenet_cifar" }
data { kind: SYNTHETIC synthetic { shape: [3, 32, 32] train_samples: 6001 test_samples: 200 } }
batch_size: 5
gradient_accumulation_steps: 3
epochs: 3
optimizer { lr: 0.02 momentum: 0.9 clip_grad_norm: 0.5 clip_grad_value: 0.05 }
lr_schedule { kind: ONE_CYCLE }
checkpoint { every_steps: 40 keep: 2 }
seed: 9
SPEC

# run NAME: trains to the end into $tmp/NAME, exporting the final model.
run() {
  "$cohort" train --job="$tmp/job.textproto" --devices=cpu:2 \
    --checkpoint-dir="$tmp/$1" --export="$tmp/$1.safetensors" \
    --report="$tmp/$1.json" > "$tmp/$1.out" 2>&1
}

run straight || fail "undisturbed run: $(tail -3 "$tmp/straight.out")"
steps=$(/usr/bin/python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['steps'])" "$tmp/straight.json" 2>/dev/null)

"$cohort" train --job="$tmp/job.textproto" --devices=cpu:2 --quiet \
  --checkpoint-dir="$tmp/killed" > "$tmp/killed.out" 2>&1 &
pid=$!
pids+=("$pid")
past_120() { [[ $(newest_step "$tmp/killed") -ge 120 ]]; }
if wait_for 60 past_120; then
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  at=$(newest_step "$tmp/killed")
  if [[ -n "$steps" && "$at" -lt "$steps" ]]; then
    ok "killed with SIGKILL at checkpoint step $at of $steps"
  else
    fail "the kill came too late: newest checkpoint $at, job $steps steps"
  fi
  run killed || fail "resumed run: $(tail -3 "$tmp/killed.out")"
  resumed=$(grep -o "resuming from step [0-9]*" "$tmp/killed.out" | head -1)
  if [[ -n "$resumed" ]]; then
    ok "the restart resumed: $resumed"
  else
    fail "the restart did not say it resumed: $(head -5 "$tmp/killed.out")"
  fi
  if cmp -s "$tmp/straight.safetensors" "$tmp/killed.safetensors"; then
    ok "the resumed job's model is byte for byte the undisturbed one's ($(stat -c %s "$tmp/straight.safetensors") bytes, $steps steps)"
  else
    fail "the resumed job's model differs from the undisturbed one's"
  fi
else
  fail "no checkpoint past step 120 within 60 s: $(tail -3 "$tmp/killed.out")"
fi
finish
