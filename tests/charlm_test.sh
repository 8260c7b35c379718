#!/usr/bin/env bash
# A small GPT learns a character-level language model of text gathered
# from this machine's Debian packages (tools/make-corpus):
#   1. on 2 workers with all-reduce, to a validation loss well below the
#      unigram baseline this test computes from the same split (a model
#      that learned only byte frequencies);
#   2. in parameter-server mode (SSP, one shard) on the same samples (same
#      seed, same steps), to a validation loss within PS_MARGIN of
#      all-reduce's;
#   3. a job killed with SIGKILL after a checkpoint and started again ends
#      with the model, byte for byte, of the same job run undisturbed.
# Only times depend on how busy the machine is, and none is checked: the
# all-reduce run computes the same model however its steps are timed, and
# the margin of the SSP run covers the staleness a busy machine gives it
# (see PS_MARGIN).
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

# report NAME KEY: a number from the report of run NAME ("" if none).
report() {
  /usr/bin/python3 -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" \
    "$tmp/$1.json" "$2" 2>/dev/null
}

# train_local NAME: cohort local on $tmp/NAME.textproto with 2 workers;
# fails (and returns 1) if it does not succeed. The time limit only catches
# a hang: a busy machine takes minutes.
train_local() {
  SECONDS=0
  if timeout 1800 "$cohort" local --job="$tmp/$1.textproto" --workers=2 \
      --threads=1 --report="$tmp/$1.json" > "$tmp/$1.out" 2>&1; then
    ok "$1 job on 2 workers finished in ${SECONDS} s"
  else
    fail "$1 job: $(tail -5 "$tmp/$1.out")"
    return 1
  fi
}

# 1. All-reduce on two workers: synchronous steps from a fixed seed, so the
# same loss on every run here (0.7 leaves room for other CPUs' rounding).
spec > "$tmp/allreduce.textproto"
if train_local allreduce; then
  ar_loss=$(report allreduce test_loss)
  if [[ -n "$ar_loss" ]] && awk -v l="$ar_loss" -v b="$baseline" 'BEGIN { exit !(l < 0.7 * b) }'; then
    ok "allreduce: validation loss $ar_loss nats per byte < 0.7 x unigram $baseline"
  else
    fail "allreduce: validation loss '$ar_loss' not below 0.7 x unigram $baseline"
  fi
fi

# 2. Parameter-server mode, stale synchronous, on the same samples: the
# workers share the data in chunks until max_steps x 2 chunks are done,
# which is all-reduce's 600 steps of 2 x 16 samples, however the chunks
# fall between the workers. (Gradient clipping needs the all-reduced
# gradient: not in PS mode.)
#
# Its loss is not the same from run to run: every push is an AdamW step on
# one worker's batch of 16, computed on parameters up to 2 rounds stale,
# and which pushes land between a worker's pull and its push depends on
# how the machine schedules the workers, busy or not. SSP minus all-reduce
# measured 0.36 to 0.74 nats over eleven runs: idle, beside other jobs,
# beside busy loops, and with the workers stopped in turn
# (docs/BENCHMARKS.md). The margin is 1.0, which still asks for 0.4 nats
# below the unigram.
PS_MARGIN=1.0
spec 'mode: PS' 'ps { consistency: SSP staleness: 2 }' |
  sed 's/ clip_grad_norm: 1//' > "$tmp/ps.textproto"
if train_local ps; then
  ps_loss=$(report ps test_loss)
  ps_samples=$(report ps samples)
  ar_samples=$(report allreduce samples)
  if [[ -n "$ps_samples" && "$ps_samples" == "$ar_samples" ]]; then
    ok "ps: trained on the $ps_samples samples all-reduce did"
  else
    fail "ps: trained on '$ps_samples' samples, all-reduce on '$ar_samples'"
  fi
  if [[ -n "$ps_loss" && -n "$ar_loss" ]] &&
     awk -v p="$ps_loss" -v a="$ar_loss" -v m="$PS_MARGIN" 'BEGIN { exit !(p < a + m) }'; then
    ok "ps: validation loss $ps_loss nats per byte < all-reduce's $ar_loss + $PS_MARGIN (unigram $baseline)"
  else
    fail "ps: validation loss '$ps_loss' not below all-reduce's '$ar_loss' + $PS_MARGIN: $(tail -3 "$tmp/ps.out")"
  fi
fi

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
if wait_for 900 past_50; then
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
  fail "no checkpoint past step 50 within 900 s: $(tail -3 "$tmp/killed.out")"
fi
finish
