#!/usr/bin/env bash
# Compressed all-reduce across two worker processes (cohort local):
# PowerSGD's error feedback is each worker's own, kept beside the
# checkpoints, so a run stopped at a checkpoint and resumed ends with the
# same bits as one that ran straight through; without the saved state it
# does not (the comparison can fail). FP16 and BF16 runs train, on the
# all-reduce and on the parameter-server push, and bad compression blocks
# are refused with the field named.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"

spec() {  # spec COMPRESSION-LINE: a 32-step synthetic job, checkpoints every 10
  cat <<SPEC
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 512 test_samples: 64 } }
batch_size: 8
epochs: 1
optimizer { kind: SGD lr: 0.05 momentum: 0.9 }
seed: 3
checkpoint { every_steps: 10 }
$1
SPEC
}

# run NAME SPEC DIR MAX_STEPS [EXPORT]: cohort local with 2 workers.
run() {
  local name=$1 job=$2 dir=$3 steps=$4 export=${5:-}
  "$cohort" local --job="$job" --workers=2 --quiet --max-steps="$steps" \
    --checkpoint-dir="$dir" ${export:+--export="$export"} \
    > "$tmp/$name.out" 2>&1 || fail "$name: $(tail -3 "$tmp/$name.out")"
}

spec "compression { kind: POWERSGD rank: 2 warmup_steps: 4 }" > "$tmp/p.textproto"
run straight "$tmp/p.textproto" "$tmp/a" 30 "$tmp/a.safetensors"
run first "$tmp/p.textproto" "$tmp/b" 20
if ls "$tmp/b/exchange/rank0-of2.step20.f32" "$tmp/b/exchange/rank1-of2.step20.f32" > /dev/null 2>&1; then
  ok "every worker kept its compression state of step 20"
else
  fail "no compression state of step 20: $(ls -R "$tmp/b")"
fi
cp -r "$tmp/b" "$tmp/c"
cp -r "$tmp/b" "$tmp/d"
run resumed "$tmp/p.textproto" "$tmp/b" 30 "$tmp/b.safetensors"
if cmp -s "$tmp/a.safetensors" "$tmp/b.safetensors"; then
  ok "PowerSGD: resumed at step 20, the same bits as straight through"
else
  fail "PowerSGD: the resumed run differs from the straight one"
fi
rm -r "$tmp/c/exchange"
run zeroed "$tmp/p.textproto" "$tmp/c" 30 "$tmp/c.safetensors"
if grep -q "starts compression's error feedback from zero at step 20" "$tmp/zeroed.out" &&
   ! cmp -s "$tmp/a.safetensors" "$tmp/c.safetensors"; then
  ok "without the saved state the workers say so and the run differs"
else
  fail "without the saved state: $(grep cohort: "$tmp/zeroed.out")"
fi
truncate -s -1 "$tmp/d/exchange/rank1-of2.step20.f32"
run damaged "$tmp/p.textproto" "$tmp/d" 30
if grep -q "rank 1 starts compression's error feedback from zero at step 20: the file is damaged: .* bytes are not whole floats (.*rank1-of2.step20.f32)" "$tmp/damaged.out"; then
  ok "a damaged state file is named as damaged, and the run goes on"
else
  fail "damaged state file: $(grep cohort: "$tmp/damaged.out")"
fi

# In PS mode FP16 and BF16 halve the pushes; the run trains as the float
# one does.
for kind in NONE FP16 BF16; do
  spec "mode: PS
ps { shards: 2 }
compression { kind: $kind }" > "$tmp/ps$kind.textproto"
  "$cohort" local --job="$tmp/ps$kind.textproto" --workers=2 --quiet \
    --report="$tmp/ps$kind.json" > "$tmp/ps$kind.out" 2>&1 ||
    fail "PS $kind: $(tail -3 "$tmp/ps$kind.out")"
done
loss() { sed -n 's/.*"final_loss": \([0-9.e+-]*\).*/\1/p' "$1"; }
for kind in FP16 BF16; do
  if awk -v a="$(loss "$tmp/ps$kind.json")" -v b="$(loss "$tmp/psNONE.json")" \
       'BEGIN { exit !(a != "" && b != "" && (a - b) < 0.05 * b + 0.01 && (b - a) < 0.05 * b + 0.01) }'; then
    ok "PS $kind: final loss $(loss "$tmp/ps$kind.json"), float pushes $(loss "$tmp/psNONE.json")"
  else
    fail "PS $kind: final loss '$(loss "$tmp/ps$kind.json")' against '$(loss "$tmp/psNONE.json")'"
  fi
done

for kind in FP16 BF16; do
  spec "compression { kind: $kind }" > "$tmp/$kind.textproto"
  "$cohort" local --job="$tmp/$kind.textproto" --workers=2 --quiet \
    > "$tmp/$kind.out" 2>&1 &&
    grep -q "test accuracy" "$tmp/$kind.out" &&
    ok "$kind: 2 workers trained" || fail "$kind: $(tail -3 "$tmp/$kind.out")"
done

spec "compression { kind: FP16 rank: 4 }" > "$tmp/bad1.textproto"
expect_refused "rank without POWERSGD" "compression.rank applies only to POWERSGD" \
  "$cohort" local --job="$tmp/bad1.textproto" --workers=2
spec "compression { kind: POWERSGD rank: -1 }" > "$tmp/bad2.textproto"
expect_refused "negative rank" "compression.rank must be in \[1, 1024\], got -1" \
  "$cohort" local --job="$tmp/bad2.textproto" --workers=2
spec "compression { kind: POWERSGD min_compression_rate: 0 }" > "$tmp/bad3.textproto"
expect_refused "zero rate" "compression.min_compression_rate must be > 0" \
  "$cohort" local --job="$tmp/bad3.textproto" --workers=2
spec "mode: PS
compression { kind: POWERSGD }" > "$tmp/bad4.textproto"
expect_refused "POWERSGD in PS mode" "compression.kind POWERSGD compresses the all-reduce exchange" \
  "$cohort" local --job="$tmp/bad4.textproto" --workers=2

finish
