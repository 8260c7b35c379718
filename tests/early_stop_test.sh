#!/usr/bin/env bash
# Validation-driven control with real processes (2 workers of
# `cohort local`). The test loss is evaluated every 16 steps; patience 3
# with a min_delta the loss soon stops beating makes the run stop early.
#   1. An undisturbed run stops early, says why in one line, and its report
#      names the best evaluation; checkpoint.keep_best keeps that
#      evaluation's checkpoint in DIR/best (beside the newest `keep`), it
#      verifies, best.json agrees, and `cohort evaluate --checkpoint=DIR/best`
#      measures the same loss.
#   2. The same job killed with kill -9 (every process) after a checkpoint
#      later than its best evaluation (so that a resume that forgot the best
#      would stop later), then started again, resumes and stops at the same
#      step with the same best; its final and best parameters are byte for
#      byte the same.
#   3. Elastic: kill -9 of one worker there, a replacement, a regroup: the
#      same again.
#
# usage: early_stop_test.sh COHORT
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cohort=$(readlink -f "$1")
py=/usr/bin/python3

spec() {  # spec CHECKPOINT_DIR > file
  cat <<SPEC
name: "early-stop"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 2048 test_samples: 512 noise: 3 } }
batch_size: 16
epochs: 12
optimizer { lr: 0.01 momentum: 0.9 }
eval { every_steps: 16 metric: "loss" early_stopping_patience: 3 min_delta: 0.005 }
checkpoint { dir: "$1" every_steps: 16 keep: 2 keep_best: true }
seed: 7
cluster { min_workers: 2 max_workers: 2 max_restarts: 2 heartbeat_interval_ms: 300
          heartbeat_misses: 3 collective_timeout_ms: 4000 }
SPEC
}
field() {  # field REPORT KEY: the report's value, as Python prints it
  $py -c "import json, sys; print(repr(json.load(open(sys.argv[1]))[sys.argv[2]]))" "$1" "$2" 2>/dev/null
}
local_run() {  # local_run NAME [flags]: cohort local on $tmp/NAME.textproto
  local name=$1
  shift
  timeout 150 "$cohort" local --job="$tmp/$name.textproto" --workers=2 --threads=1 \
    --report="$tmp/$name.json" "$@" >> "$tmp/$name.log" 2>&1
}

# Both runs use one spec and one checkpoint directory (moved aside after
# each run): the exported files, which record the spec, can then be
# compared byte for byte.
spec "$tmp/ckpt" > "$tmp/job.textproto"
cp "$tmp/job.textproto" "$tmp/a.textproto"
cp "$tmp/job.textproto" "$tmp/b.textproto"
cp "$tmp/job.textproto" "$tmp/c.textproto"

# 1. Undisturbed.
start=$SECONDS
local_run a
rc=$?
mv "$tmp/ckpt" "$tmp/a"
steps=$(field "$tmp/a.json" steps)
stopped=$(field "$tmp/a.json" stopped_early)
best_step=$(field "$tmp/a.json" best_step)
best=$(field "$tmp/a.json" best_metric)
echo "undisturbed: exit $rc in $((SECONDS - start)) s, $steps steps (of 768), best loss $best at step $best_step, stopped_early $stopped"
if [[ $rc == 0 && "$stopped" == True && "$steps" =~ ^[0-9]+$ && $steps -lt 700 && \
      "$best_step" =~ ^[0-9]+$ && $best_step -le $((steps - 48)) ]]; then
  ok "the run stops early at step $steps, 3 evaluations after its best (step $best_step)"
else
  fail "no early stop: exit $rc, steps '$steps', stopped_early '$stopped', best_step '$best_step': $(tail -3 "$tmp/a.log")"
fi
line=$(grep -c "early stopping at step $steps: loss has not improved on .* (step $best_step) for 3 evaluations" "$tmp/a.log")
[[ "$line" -ge 1 ]] && ok "the worker says why: $(grep -m1 'early stopping at' "$tmp/a.log")" \
  || fail "no early-stopping line in the log: $(grep -i 'early' "$tmp/a.log" | head -3)"

kept=$(ls "$tmp/a" | grep -cE '^ckpt-[0-9]+\.cohort$')
best_file=$(ls "$tmp/a/best" 2>/dev/null | grep -E '^ckpt-[0-9]+\.cohort$')
json_step=$($py -c "import json; print(json.load(open('$tmp/a/best/best.json'))['step'])" 2>/dev/null)
json_value=$($py -c "import json; print(repr(json.load(open('$tmp/a/best/best.json'))['value']))" 2>/dev/null)
if [[ $kept == 2 && "$best_file" == "$(printf 'ckpt-%012d.cohort' "$best_step")" && \
      "$json_step" == "$best_step" && "$json_value" == "$best" ]]; then
  ok "keep_best: $best_file in best/ beside the newest 2; best.json says step $json_step, loss $json_value"
else
  fail "keep_best: $kept newest kept, best/ holds '$best_file', best.json step '$json_step' value '$json_value' (report: step $best_step, $best)"
fi
if out=$("$cohort" checkpoint verify "$tmp/a/best" 2>&1); then
  ok "the best checkpoint verifies: $out"
else
  fail "cohort checkpoint verify best/: $out"
fi
eval_line=$("$cohort" evaluate --checkpoint="$tmp/a/best" 2>&1)
eval_loss=$(sed -n 's/.*step \([0-9]*\): loss \([0-9.e-]*\).*/\2/p' <<< "$eval_line")
if [[ "$eval_line" == *"step $best_step:"* && -n "$eval_loss" ]] && \
   awk -v a="$eval_loss" -v b="$best" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-4) }'; then
  ok "cohort evaluate --checkpoint=DIR/best measures the best loss: $eval_line"
else
  fail "cohort evaluate --checkpoint=DIR/best: '$eval_line' (want step $best_step, loss $best)"
fi

# 2. kill -9 of the whole job after a checkpoint, then the same command again.
setsid timeout 150 "$cohort" local --job="$tmp/b.textproto" --workers=2 --threads=1 \
  --min-step-ms=60 > "$tmp/b.log" 2>&1 &
job=$!
pids+=($job)
at=96
checkpointed() { [[ $(newest_step "$tmp/ckpt") -ge $at ]]; }
wait_for 60 checkpointed
kill -9 -- -"$job" 2>/dev/null
wait "$job" 2>/dev/null
sleep 0.5
# Live processes of the session (a container's init may leave zombies).
left=$(ps -o stat= -s "$job" 2>/dev/null | grep -vc '^Z')
killed_at=$(newest_step "$tmp/ckpt")
if [[ $killed_at -ge $at && $killed_at -lt ${steps:-0} && $left == 0 && ! -f "$tmp/b.json" ]]; then
  ok "killed with kill -9 (all processes) after the checkpoint of step $killed_at"
else
  fail "kill -9: newest checkpoint '$killed_at' (want >= $at and < $steps), $left processes left"
fi
local_run b
rc=$?
mv "$tmp/ckpt" "$tmp/b"
b_steps=$(field "$tmp/b.json" steps)
b_stopped=$(field "$tmp/b.json" stopped_early)
b_best_step=$(field "$tmp/b.json" best_step)
b_best=$(field "$tmp/b.json" best_metric)
# Workers of cohort local are quiet: a resumed run trains fewer samples.
b_samples=$(field "$tmp/b.json" samples)
a_samples=$(field "$tmp/a.json" samples)
resumed=$(( ${b_samples:-0} == ${a_samples:-0} * (${steps:-1} - killed_at) / ${steps:-1} ))
echo "resumed: exit $rc, $b_steps steps, best loss $b_best at step $b_best_step, stopped_early $b_stopped"
if [[ $rc == 0 && $resumed -ge 1 && "$b_steps" == "$steps" && "$b_stopped" == True && \
      "$b_best_step" == "$best_step" && "$b_best" == "$best" ]]; then
  ok "resumed from step $killed_at, it stops at the same step ($b_steps) with the same best (loss $b_best at step $b_best_step)"
else
  fail "resumed run: exit $rc, samples $b_samples (undisturbed $a_samples), steps '$b_steps' best '$b_best' at '$b_best_step' stopped '$b_stopped' (want $steps, $best at $best_step): $(tail -3 "$tmp/b.log")"
fi
same_parameters() {  # same_parameters RUN: its final and best as run a's
  local which label
  for which in "" /best; do
    label=${which:+best}
    "$cohort" export --checkpoint="$tmp/a$which" --format=safetensors --out="$tmp/a.st" > /dev/null 2>&1
    "$cohort" export --checkpoint="$tmp/$1$which" --format=safetensors --out="$tmp/$1.st" > /dev/null 2>&1
    if [[ -s "$tmp/a.st" ]] && cmp -s "$tmp/a.st" "$tmp/$1.st"; then
      ok "$1: the ${label:-final} parameters are byte for byte those of the undisturbed run ($(sha256sum < "$tmp/a.st" | cut -c1-16))"
    else
      fail "$1: the ${label:-final} parameters differ from the undisturbed run's"
    fi
    rm -f "$tmp/a.st" "$tmp/$1.st"
  done
}
same_parameters b

# 3. Elastic: kill -9 of one of the two workers after a checkpoint; a
# replacement joins, the job regroups (generation 2) from the newest state
# a survivor holds, and goes on.
addr="127.0.0.1:$(free_port)"
mport=$(free_port)
"$cohort" coordinator --job="$tmp/c.textproto" --listen="$addr" --report="$tmp/c.json" \
  --metrics-listen="127.0.0.1:$mport" 2> "$tmp/c.log" &
coord=$!
pids+=($coord)
w=()
for i in 0 1; do
  "$cohort" worker --coordinator="$addr" --threads=1 --min-step-ms=100 --quiet 2> "$tmp/c.w$i.log" &
  w+=($!)
  pids+=($!)
done
wait_for 60 checkpointed
# The best so far in the coordinator's metrics (past step 96 it is step 80's).
best_metrics() {
  /usr/bin/python3 - "$mport" "$best_step" <<'PY'
import re, sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=2).read().decode()
steps = re.findall(r'^cohort_worker_best_step\{[^}]*metric="loss"[^}]*\} (\S+)$', text, re.M)
print(" ".join(steps))
sys.exit(0 if len(steps) == 2 and all(float(v) == float(sys.argv[2]) for v in steps) else 1)
PY
}
if wait_for 2 best_metrics; then
  ok "/metrics: cohort_worker_best_step{metric=\"loss\"} is $best_step on both workers"
else
  fail "/metrics: cohort_worker_best_step: '$(best_metrics)' (want $best_step twice)"
fi
kill -9 "${w[1]}"
killed_at=$(newest_step "$tmp/ckpt")
"$cohort" worker --coordinator="$addr" --threads=1 --quiet 2> "$tmp/c.w2.log" &
pids+=($!)
timeout 120 tail --pid="$coord" -f /dev/null
c_steps=$(field "$tmp/c.json" steps)
c_best_step=$(field "$tmp/c.json" best_step)
c_best=$(field "$tmp/c.json" best_metric)
c_stopped=$(field "$tmp/c.json" stopped_early)
state=$(field "$tmp/c.json" state)
regrouped=$(grep -c "generation 2 formed" "$tmp/c.log")
echo "elastic: killed a worker after the checkpoint of step $killed_at; $state, $c_steps steps, best loss $c_best at step $c_best_step, stopped_early $c_stopped"
mv "$tmp/ckpt" "$tmp/c"
if [[ "$state" == "'SUCCEEDED'" && $regrouped -ge 1 && $killed_at -lt ${steps:-0} && \
      "$c_steps" == "$steps" && "$c_stopped" == True && "$c_best_step" == "$best_step" && "$c_best" == "$best" ]]; then
  ok "elastic: after a kill -9 at step >= $killed_at and a regroup, it stops at the same step ($c_steps) with the same best"
else
  fail "elastic: state $state, regrouped $regrouped, killed after $killed_at, steps '$c_steps' best '$c_best' at '$c_best_step' stopped '$c_stopped' (want $steps, $best at $best_step): $(tail -3 "$tmp/c.log")"
fi
same_parameters c
finish
