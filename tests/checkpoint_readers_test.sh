#!/usr/bin/env bash
# Every reader of checkpoints (export, predict, evaluate, checkpoint verify
# and show, train resuming) on checkpoints that are not what they seem:
#  - a job spec edited to a model of 2e9 outputs, checksums recomputed so the
#    file verifies: one line, exit 2, never an abort in a huge allocation;
#  - a FIFO named like the newest checkpoint: never waited on; verify fails
#    its line, train resumes from the good one with a warning, the model
#    commands refuse unless --skip-damaged;
#  - a damaged newest checkpoint: export, predict and evaluate refuse,
#    naming it and the newest intact one; --skip-damaged uses that one and
#    says so on stderr.
#
# usage: checkpoint_readers_test.sh COHORT REWRITE_CHECKPOINT_SPEC
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort=$(readlink -f "$1")
rewrite=$(readlink -f "$2")
py=/usr/bin/python3

job="$tmp/job.textproto"
cat > "$job" <<SPEC
model { layers { linear { out_features: 32 } } layers { relu {} }
        layers { linear { out_features: 10 } } }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 256 test_samples: 16 } }
batch_size: 8
epochs: 1
optimizer { lr: 0.1 }
checkpoint { dir: "$tmp/ck" every_steps: 10 keep: 3 }
SPEC
"$cohort" train --job="$job" --quiet > /dev/null 2> "$tmp/train.err" ||
  fail "cohort train did not write checkpoints: $(cat "$tmp/train.err")"
$py -c "import numpy as np; np.save('$tmp/x.npy', np.ones((3, 100), np.float32))"
newest=ckpt-000000000032.cohort
older=ckpt-000000000030.cohort

# 1. A spec edited to a far larger model, the file still verifying.
mkdir -p "$tmp/big"
"$rewrite" "$tmp/ck/$newest" "$tmp/big" "out_features: 32" "out_features: 2000000000" ||
  fail "cannot rewrite the checkpoint's spec"
big="$tmp/big/$newest"
mismatch="tensor params holds [0-9]+ values where the model it records needs 222000000016$"
for cmd in "export --format=safetensors --out=$tmp/out.safetensors" \
           "predict --input=$tmp/x.npy --out=$tmp/y.npy" evaluate; do
  # shellcheck disable=SC2086
  expect_refused "a spec edited to 2e9 outputs: ${cmd%% *}" "$big: $mismatch" \
    "$cohort" $cmd --checkpoint="$big"
done
expect_refused "a spec edited to 2e9 outputs: checkpoint show" "$big: $mismatch" \
  "$cohort" checkpoint show "$big"
out=$(timeout 30 "$cohort" checkpoint verify "$tmp/big" 2> "$tmp/verify.err")
rc=$?
if [[ $rc == 2 ]] && grep -qE "^$newest .*DATA_LOSS: $mismatch" <<< "$out"; then
  ok "a spec edited to 2e9 outputs: checkpoint verify fails it: $(grep "^$newest" <<< "$out" | tr -s ' ')"
else
  fail "a spec edited to 2e9 outputs: checkpoint verify: exit $rc: $out $(cat "$tmp/verify.err")"
fi

# The model commands on checkpoint directory DIR: each must be refused in
# one line that says NEEDLE.
refuse_model_commands() {
  local name=$1 dir=$2 needle=$3
  expect_refused_text "$name: export" "$needle" \
    "$cohort" export --checkpoint="$dir" --format=safetensors --out="$tmp/out.safetensors"
  expect_refused_text "$name: predict" "$needle" \
    "$cohort" predict --checkpoint="$dir" --input="$tmp/x.npy" --out="$tmp/y.npy"
  expect_refused_text "$name: evaluate" "$needle" \
    "$cohort" evaluate --checkpoint="$dir"
}

# expect_fallback NAME DIR BAD STEP COMMAND...: with --skip-damaged, COMMAND
# succeeds on the newest intact checkpoint (of STEP) and says on stderr
# that it skipped DIR/BAD and used that one.
expect_fallback() {
  local name=$1 dir=$2 bad=$3 step=$4
  shift 4
  local used err rc
  used=$(printf '%s/ckpt-%012d.cohort' "$dir" "$step")
  err=$(timeout 60 "$@" --skip-damaged 2>&1 >"$tmp/fallback.out")
  rc=$?
  if [[ $rc == 0 ]] &&
     grep -qF "warning: skipping damaged checkpoint $dir/$bad: " <<< "$err" &&
     grep -qF "warning: using $used (step $step), the newest checkpoint in $dir that verifies" <<< "$err"; then
    ok "$name --skip-damaged: $(tr '\n' ' ' <<< "$err")"
  else
    fail "$name --skip-damaged: exit $rc: $err $(cat "$tmp/fallback.out")"
  fi
}

# 2. A FIFO named like the newest checkpoint, beside good ones.
cp -r "$tmp/ck" "$tmp/fifo"
fifo="$tmp/fifo/ckpt-000000000099.cohort"
mkfifo "$fifo"
refuse_model_commands "a FIFO as the newest checkpoint" "$tmp/fifo" \
  "the newest checkpoint in $tmp/fifo does not verify ($fifo: a FIFO, not a regular file); the newest that does is $tmp/fifo/$newest (step 32): pass --skip-damaged to use it"
expect_refused_text "checkpoint show of a FIFO" "$fifo: a FIFO, not a regular file" \
  "$cohort" checkpoint show "$fifo"
out=$(timeout 30 "$cohort" checkpoint verify "$tmp/fifo" 2> "$tmp/verify.err")
rc=$?
if [[ $rc == 2 ]] && grep -q "^ckpt-000000000099.cohort .*DATA_LOSS: a FIFO, not a regular file$" <<< "$out" &&
   [[ $(grep -c '  OK$' <<< "$out") == 3 ]]; then
  ok "checkpoint verify reports the FIFO: $(grep "^ckpt-000000000099" <<< "$out" | tr -s ' ')"
else
  fail "checkpoint verify with a FIFO: exit $rc: $out $(cat "$tmp/verify.err")"
fi
err=$(timeout 60 "$cohort" train --job="$job" --checkpoint-dir="$tmp/fifo" --quiet 2>&1 >/dev/null)
rc=$?
if [[ $rc == 0 ]] && grep -qF "skipping a bad checkpoint: $fifo: a FIFO, not a regular file" <<< "$err"; then
  ok "train resumes past the FIFO: $err"
else
  fail "train resuming with a FIFO: exit $rc: $err"
fi
[[ -p "$fifo" ]] && ok "the FIFO is left in place" || fail "the FIFO is gone"
expect_fallback "FIFO: export" "$tmp/fifo" ckpt-000000000099.cohort 32 \
  "$cohort" export --checkpoint="$tmp/fifo" --format=onnx --out="$tmp/fifo.onnx"
grep -qF "the step-32 model in $tmp/fifo/$newest" "$tmp/fallback.out" ||
  fail "export does not name the checkpoint it used: $(cat "$tmp/fallback.out")"
expect_fallback "FIFO: predict" "$tmp/fifo" ckpt-000000000099.cohort 32 \
  "$cohort" predict --checkpoint="$tmp/fifo" --input="$tmp/x.npy" --out="$tmp/y.npy"
expect_fallback "FIFO: evaluate" "$tmp/fifo" ckpt-000000000099.cohort 32 \
  "$cohort" evaluate --checkpoint="$tmp/fifo"

# 3. A damaged newest checkpoint (one flipped bit in its tensors).
cp -r "$tmp/ck" "$tmp/dmg"
$py - "$tmp/dmg/$newest" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[len(data) // 2] ^= 0x10
open(path, "wb").write(data)
PY
refuse_model_commands "a damaged newest checkpoint" "$tmp/dmg" \
  "the newest checkpoint in $tmp/dmg does not verify ($tmp/dmg/$newest: "
expect_refused_text "a damaged newest checkpoint: the refusal names the intact one" \
  "; the newest that does is $tmp/dmg/$older (step 30): pass --skip-damaged to use it" \
  "$cohort" export --checkpoint="$tmp/dmg" --format=onnx --out="$tmp/dmg.onnx"
expect_fallback "damaged: export" "$tmp/dmg" "$newest" 30 \
  "$cohort" export --checkpoint="$tmp/dmg" --format=onnx --out="$tmp/dmg.onnx"
grep -qF "the step-30 model in $tmp/dmg/$older" "$tmp/fallback.out" ||
  fail "export does not name the checkpoint it used: $(cat "$tmp/fallback.out")"
# A file named directly is what the user asked for: no fallback.
expect_refused_text "a damaged checkpoint file" "$tmp/dmg/$newest: " \
  "$cohort" export --checkpoint="$tmp/dmg/$newest" --format=onnx --out="$tmp/dmg.onnx" --skip-damaged

"$cohort" export --help | grep -q -- "--skip-damaged" &&
  ok "export --help documents --skip-damaged" || fail "export --help lacks --skip-damaged"

finish
