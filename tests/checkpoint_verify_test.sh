#!/usr/bin/env bash
# `cohort checkpoint verify DIR` on checkpoints written by a real
# `cohort train`: all good (exit 0, one OK line each), then copies with one
# flipped bit, a truncation and a renamed file (exit 2, the bad file's line
# names the damage, the good ones stay OK), and a missing or empty
# directory (exit 2, one clear line).
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"

job="$tmp/job.textproto"
cat > "$job" <<SPEC
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 256 test_samples: 16 } }
batch_size: 8
epochs: 1
optimizer { lr: 0.1 }
checkpoint { dir: "$tmp/ck" every_steps: 10 keep: 3 }
SPEC
"$cohort" train --job="$job" --quiet >/dev/null 2>"$tmp/train.err" ||
  fail "cohort train did not write checkpoints: $(cat "$tmp/train.err")"

# verify DIR: sets $out (stdout), $err (stderr), $rc.
verify() {
  out=$("$cohort" checkpoint verify "$1" 2>"$tmp/verify.err")
  rc=$?
  err=$(cat "$tmp/verify.err")
}
line_of() { echo "$out" | grep "^$1 "; }

# 1. The intact directory: steps 20, 30 and the final 32 (32 steps, every
# 10, keep 3); the final one resumes at the start of epoch 1.
verify "$tmp/ck"
if [[ $rc -eq 0 && $(echo "$out" | grep -c '^ckpt-.*  OK$') -eq 3 ]] &&
   line_of ckpt-000000000030.cohort | grep -qE '^\S+ +30 +0 +240 +1 +[0-9]+  OK$' &&
   line_of ckpt-000000000032.cohort | grep -qE '^\S+ +32 +1 +0 +1 +[0-9]+  OK$'; then
  ok "intact checkpoints verify: $(echo "$out" | tail -1)"
else
  fail "intact checkpoints: exit $rc: $out $err"
fi

# expect_damage DIR FILE NEEDLE WHAT: exit 2, FILE's line says NEEDLE, the
# other two files still OK, stderr names FILE.
expect_damage() {
  verify "$1"
  if [[ $rc -eq 2 ]] && line_of "$2" | grep -q "DATA_LOSS: .*$3" &&
     [[ $(echo "$out" | grep -c '^ckpt-.*  OK$') -eq 2 && "$err" == *"1 of 3"*"$2"* ]]; then
    ok "$4: $(line_of "$2" | sed 's/  */ /g')"
  else
    fail "$4: exit $rc: $out $err"
  fi
}

# 2. One flipped bit in a tensor's bytes.
cp -r "$tmp/ck" "$tmp/flip"
/usr/bin/python3 - "$tmp/flip/ckpt-000000000020.cohort" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[len(data) // 2] ^= 0x10  # the middle of the file: tensor bytes
open(path, "wb").write(data)
PY
expect_damage "$tmp/flip" ckpt-000000000020.cohort "CRC32C mismatch" "flipped bit"

# 3. A file cut short (a torn copy).
cp -r "$tmp/ck" "$tmp/trunc"
truncate -s 5000 "$tmp/trunc/ckpt-000000000030.cohort"
expect_damage "$tmp/trunc" ckpt-000000000030.cohort "" "truncated file"
line_of ckpt-000000000030.cohort | grep -q ' 5000  DATA_LOSS' ||
  fail "the truncated file's line does not show its 5000 bytes: $out"

# 4. A file renamed to another step: the header disagrees with the name.
cp -r "$tmp/ck" "$tmp/renamed"
mv "$tmp/renamed/ckpt-000000000032.cohort" "$tmp/renamed/ckpt-000000000033.cohort"
expect_damage "$tmp/renamed" ckpt-000000000033.cohort "header says step 32" "renamed file"

# 5. Nothing to verify.
verify "$tmp/missing"
[[ $rc -eq 2 && "$err" == *"$tmp/missing does not exist"* ]] &&
  ok "missing directory: $err" || fail "missing directory: exit $rc: $err"
mkdir -p "$tmp/empty"
touch "$tmp/empty/ckpt-000000000005.cohort.tmp-123"  # a dead writer's temp
verify "$tmp/empty"
[[ $rc -eq 2 && "$err" == *"no ckpt-*.cohort files in $tmp/empty"* ]] &&
  ok "empty directory: $err" || fail "empty directory: exit $rc: $err"
verify "$job"
[[ $rc -eq 2 && "$err" == *"not a directory"* ]] &&
  ok "a file, not a directory: $err" || fail "a file: exit $rc: $err"
err=$("$cohort" checkpoint fix "$tmp/ck" 2>&1 >/dev/null)
[[ $? -eq 2 && "$err" == *'unknown action "fix"'* ]] &&
  ok "unknown action: $err" || fail "unknown action: $err"

finish
