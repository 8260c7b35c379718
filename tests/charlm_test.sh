#!/usr/bin/env bash
# Issue 21: a small GPT learns a character-level language model of text
# gathered from this machine's Debian packages (tools/make-corpus):
#   1. on 2 workers with all-reduce, and
#   2. in parameter-server mode (SSP, one shard),
# each to a validation loss well below the unigram baseline this test
# computes from the same split (a model that learned only byte frequencies);
#   3. a job killed with SIGKILL after a checkpoint and started again ends
#      with the model, byte for byte, of the same job run undisturbed.
#
# usage: charlm_test.sh COHORT MAKE_CORPUS
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cohort=$(readlink -f "$1")
make_corpus=$(readlink -f "$2")

if ! "$make_corpus" "$tmp/corpus.txt" 400000 2> "$tmp/corpus.err"; then
  echo "SKIP: no text corpus on this machine: $(cat "$tmp/corpus.err")"
  exit 0
fi

# The unigram baseline: cross-entropy (nats per byte) of the validation
# targets under the training split's byte frequencies (add-one smoothed).
# The split is the data set's: the last 10% of the file, windows of
# CONTEXT + 1 every CONTEXT bytes, targets the last CONTEXT of each.
baseline=$(/usr/bin/python3 - "$tmp/corpus.txt" 64 <<'PY'
import math, sys
data = open(sys.argv[1], "rb").read()
ctx = int(sys.argv[2])
held = int(len(data) * 0.1)
train, val = data[:len(data) - held], data[len(data) - held:]
counts = [1] * 256
for b in train:
    counts[b] += 1
total = sum(counts)
nll, n = 0.0, 0
for start in range(0, len(val) - ctx, ctx):
    for b in val[start + 1:start + ctx + 1]:
        nll -= math.log(counts[b] / total)
        n += 1
print("%.4f" % (nll / n))
PY
)
[[ -n "$baseline" ]] || { fail "no unigram baseline"; finish; }
ok "unigram baseline on the validation split: $baseline nats per byte"

# spec EXTRA...: the job, with EXTRA lines appended.
spec() {
  cat <<SPEC
name: "charlm-test"
data { kind: TOKENS tokens { train: "$tmp/corpus.txt" context: 64 } }
model {
  layers { embedding { vocab_size: 256 dim: 128 } }
  layers { positional_embedding {} }
  layers { transformer_block { heads: 4 } }
  layers { transformer_block { heads: 4 } }
  layers { layernorm { per_position: true } }
  layers { tied_lm_head {} }
}
batch_size: 16
max_steps: 600
optimizer { kind: ADAMW lr: 0.003 weight_decay: 0.1 no_decay_bias_and_norm: true clip_grad_norm: 1 }
lr_schedule { kind: COSINE warmup_steps: 30 }
seed: 5
SPEC
  printf '%s\n' "$@"
}

# check_loss NAME FACTOR: the report's validation loss must be below FACTOR
# x the unigram baseline (all-reduce 0.7; PS SSP 0.8, since every push
# there is an AdamW step on one worker's batch of 16, a noisier descent:
# 2.81 against all-reduce's 2.34 when this test was written).
check_loss() {
  local loss ppl
  loss=$(/usr/bin/python3 -c "import json, sys; print('%.4f' % json.load(open(sys.argv[1]))['test_loss'])" "$tmp/$1.json" 2>/dev/null)
  ppl=$(/usr/bin/python3 -c "import json, sys; print('%.2f' % json.load(open(sys.argv[1]))['test_metrics']['perplexity'])" "$tmp/$1.json" 2>/dev/null)
  if [[ -n "$loss" ]] && awk -v l="$loss" -v b="$baseline" -v f="$2" 'BEGIN { exit !(l < f * b) }'; then
    ok "$1: validation loss $loss nats per byte (perplexity $ppl) < $2 x unigram $baseline"
  else
    fail "$1: validation loss '$loss' not below $2 x unigram $baseline: $(tail -3 "$tmp/$1.out")"
  fi
}

# train_local NAME FACTOR: cohort local on $tmp/NAME.textproto with 2
# workers, then check_loss NAME FACTOR.
train_local() {
  SECONDS=0
  if timeout 300 "$cohort" local --job="$tmp/$1.textproto" --workers=2 \
      --threads=1 --report="$tmp/$1.json" > "$tmp/$1.out" 2>&1; then
    ok "$1 job on 2 workers finished in ${SECONDS} s"
    check_loss "$1" "$2"
  else
    fail "$1 job: $(tail -5 "$tmp/$1.out")"
  fi
}

# 1. All-reduce on two workers.
spec > "$tmp/allreduce.textproto"
train_local allreduce 0.7

# 2. Parameter-server mode, stale synchronous.
# (Gradient clipping needs the all-reduced gradient: not in PS mode.)
spec 'mode: PS' 'ps { consistency: SSP staleness: 2 }' |
  sed 's/ clip_grad_norm: 1//' > "$tmp/ps.textproto"
train_local ps 0.8

# 3. kill -9 and resume, with dropout on (its streams must resume too).
spec 'checkpoint { every_steps: 25 keep: 2 }' |
  sed 's/max_steps: 600/max_steps: 100/; s/heads: 4 }/heads: 4 dropout: 0.1 }/' \
  > "$tmp/kill.textproto"
run() {  # run NAME: trains to the end into $tmp/NAME, exporting the model.
  "$cohort" train --job="$tmp/kill.textproto" --devices=cpu:2 \
    --checkpoint-dir="$tmp/$1" --export="$tmp/$1.safetensors" \
    --report="$tmp/$1.json" > "$tmp/$1.out" 2>&1
}
run straight || fail "undisturbed run: $(tail -3 "$tmp/straight.out")"
"$cohort" train --job="$tmp/kill.textproto" --devices=cpu:2 --quiet \
  --checkpoint-dir="$tmp/killed" > "$tmp/killed.out" 2>&1 &
pid=$!
pids+=("$pid")
past_50() { [[ $(newest_step "$tmp/killed") -ge 50 ]]; }
if wait_for 120 past_50; then
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  at=$(newest_step "$tmp/killed")
  if [[ "$at" -lt 100 ]]; then
    ok "killed with SIGKILL at checkpoint step $at of 100"
  else
    fail "the kill came too late: newest checkpoint $at"
  fi
  run killed || fail "resumed run: $(tail -3 "$tmp/killed.out")"
  if grep -q "resuming from step" "$tmp/killed.out"; then
    ok "the restart resumed: $(grep -o "resuming from step [0-9]*" "$tmp/killed.out" | head -1)"
  else
    fail "the restart did not say it resumed: $(head -5 "$tmp/killed.out")"
  fi
  if cmp -s "$tmp/straight.safetensors" "$tmp/killed.safetensors"; then
    ok "the resumed model is byte for byte the undisturbed one's ($(stat -c %s "$tmp/straight.safetensors") bytes)"
  else
    fail "the resumed model differs from the undisturbed one's"
  fi
else
  fail "no checkpoint past step 50 within 120 s: $(tail -3 "$tmp/killed.out")"
fi
finish
