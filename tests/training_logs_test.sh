#!/usr/bin/env bash
# --log-dir and log { dir }: a 2-worker `cohort local` job and a resumed
# `cohort train` run write train.csv, eval.csv and TensorBoard event files
# that an independent reader (tests/training_logs_check.py: its own
# CRC-32C, classes protoc generates from TensorBoard's event.proto and
# summary.proto) reads back and finds equal to the JSON reports: steps,
# final loss, learning rate, each evaluation's accuracy. Only the chief
# writes; a resumed run drops the rows past its checkpoint. Also: the
# flag wins over the spec, --metrics-listen serves `cohort local`'s
# dashboard and metrics, and an unwritable directory is refused.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
check() { /usr/bin/python3 "$here/training_logs_check.py" "$tmp/pb" "$@" 2>&1; }

mkdir -p "$tmp/pb"
(cd "$here/.." && protoc --proto_path=. --python_out="$tmp/pb" \
    tests/tensorboard/event.proto tests/tensorboard/summary.proto) \
  || fail "protoc cannot compile TensorBoard's event.proto and summary.proto"

# spec LOG_DIR [MORE...]: a small classification job (8 steps an epoch on
# 2 workers, 16 on one) that evaluates every 5 steps and at epoch ends.
spec() {
  cat <<SPEC
name: "logs"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 classes: 10 noise: 4 train_samples: 512 test_samples: 256 } }
batch_size: 32
epochs: 3
optimizer { lr: 0.05 momentum: 0.9 }
lr_schedule { kind: STEP step_size: 6 gamma: 0.5 }
eval { every_steps: 5 }
log { dir: "$1" }
SPEC
  shift
  printf '%s\n' "$@"
}

# 1. cohort local: the flag overrides the spec's directory; one writer.
spec "$tmp/not_this" > "$tmp/local.textproto"
"$cohort" local --job="$tmp/local.textproto" --workers=2 --min-step-ms=100 \
  --log-dir="$tmp/local_logs" --report="$tmp/local.json" \
  --metrics-listen=127.0.0.1:0 > "$tmp/local.out" 2>&1 &
local_pid=$!
pids+=($local_pid)
# The dashboard and /metrics while the job runs.
url=""
wait_for 30 grep -q 'dashboard at http://' "$tmp/local.out" \
  && url=$(sed -n 's|.*metrics at \(http://[^ ]*/metrics\).*|\1|p' "$tmp/local.out" | head -1)
if [[ -n "$url" ]] && metrics=$(/usr/bin/python3 -c 'import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' "$url") \
    && grep -q '^cohort_job_state' <<< "$metrics"; then
  ok "cohort local --metrics-listen serves $url"
else
  fail "cohort local --metrics-listen: no metrics at '${url}': $(tail -3 "$tmp/local.out")"
fi
if wait "$local_pid"; then
  if out=$(check "$tmp/local_logs" "$tmp/local.json"); then
    ok "cohort local --log-dir (2 workers): $out"
  else
    fail "cohort local --log-dir: $out"
  fi
  [[ ! -e "$tmp/not_this" ]] && ok "--log-dir wins over log.dir" \
    || fail "the spec's log.dir was written despite --log-dir"
else
  fail "cohort local: $(tail -5 "$tmp/local.out")"
fi

# 2. cohort train with log { dir } and checkpoints, then a run resumed
# from step 12 after the checkpoints past it are gone: its rows replace
# the first run's rows 13-20.
spec "$tmp/train_logs" "checkpoint { dir: \"$tmp/ckpt\" every_steps: 4 }" \
  > "$tmp/train.textproto"
if "$cohort" train --job="$tmp/train.textproto" --max-steps=20 \
    --report="$tmp/a.json" --quiet > "$tmp/a.out" 2>&1 \
    && out=$(check "$tmp/train_logs" "$tmp/a.json"); then
  ok "cohort train with log.dir: $out"
else
  fail "cohort train with log.dir: ${out:-$(tail -3 "$tmp/a.out")}"
fi
rm -f "$tmp/ckpt/ckpt-000000000016.cohort" "$tmp/ckpt/ckpt-000000000020.cohort"
[[ $(newest_step "$tmp/ckpt") == 12 ]] || fail "newest checkpoint is not 12"
started=$(date +%s.%N)
if "$cohort" train --job="$tmp/train.textproto" --max-steps=28 \
    --log-dir="$tmp/train_logs" --report="$tmp/b.json" > "$tmp/b.out" 2>&1 \
    && grep -q 'resuming from step 12' "$tmp/b.out" \
    && out=$(check "$tmp/train_logs" "$tmp/b.json" --from-step=12 \
             --started-after="$started" --files=2); then
  ok "resumed from step 12: $out"
else
  fail "resumed run: ${out:-$(tail -3 "$tmp/b.out")}"
fi

# 3. A directory that cannot be made fails before training.
err=$("$cohort" train --job="$tmp/train.textproto" --log-dir=/proc/no/logs \
      --checkpoint-dir="$tmp/ckpt2" 2>&1 >/dev/null)
rc=$?
[[ $rc -ne 0 && "$err" == *"log directory"*"/proc/no/logs"* ]] \
  && ok "unwritable --log-dir refused: $err" \
  || fail "unwritable --log-dir: exit $rc: $err"

finish
