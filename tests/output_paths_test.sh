#!/usr/bin/env bash
# Every output path is checked before the work (exit 2, one line, nothing
# trained): a directory that cannot be written; a device node, FIFO or
# symbolic link at the path (never replaced); a file the command reads
# (its checkpoint, --input, its job spec, a name in its checkpoint
# directory). A report that cannot be written at the end is a non-zero exit
# everywhere.
#
# usage: output_paths_test.sh COHORT
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cohort=$(readlink -f "$1")

cat > "$tmp/job.textproto" <<'SPEC'
name: "paths-test"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: [100] train_samples: 4096 test_samples: 256 } }
batch_size: 32
epochs: 2
optimizer { kind: SGD lr: 0.05 }
checkpoint { every_steps: 50 }
cluster { min_workers: 1 max_workers: 1 }
SPEC
bad="$tmp/no/such/dir/report.json"
touch "$tmp/a_file"

# expect_refused_early NAME WANT COMMAND...: exit 2 naming the flag,
# nothing trained.
expect_refused_early() {
  local name=$1 want=$2
  shift 2
  local start=$SECONDS out rc
  out=$(timeout 60 "$@" 2>&1)
  rc=$?
  if [[ $rc == 2 ]] && grep -q -- "$want" <<< "$out" &&
     ! grep -q '^result:' <<< "$out" && (( SECONDS - start < 20 )); then
    ok "$name: exit 2 before training ($want)"
  else
    fail "$name (exit $rc, $((SECONDS - start)) s): $out"
  fi
}

expect_refused_early "train --report" "--report: cannot write" \
  "$cohort" train --job="$tmp/job.textproto" --report="$bad" --quiet
expect_refused_early "train checkpoint dir" "checkpoint directory" \
  "$cohort" train --job="$tmp/job.textproto" --checkpoint-dir="$tmp/a_file/ckpt" --quiet
expect_refused_early "coordinator --report" "--report: cannot write" \
  "$cohort" coordinator --job="$tmp/job.textproto" --report="$bad" --listen=127.0.0.1:0
expect_refused_early "local --report" "--report: cannot write" \
  "$cohort" local --job="$tmp/job.textproto" --report="$bad" --workers=1

# Paths that exist and are not regular files are never replaced, whatever
# the command; a symbolic link is refused rather than followed.
mkfifo "$tmp/fifo"
ln -s "$tmp/a_file" "$tmp/link"
special=("$tmp/fifo" "$tmp/link")
if [[ $(id -u) == 0 ]]; then
  mknod -m 666 "$tmp/null" c 1 3  # a second /dev/null
  special+=("$tmp/null")
fi
"$cohort" train --job="$tmp/job.textproto" --max-steps=20 --checkpoint-dir="$tmp/ck" \
  --quiet > /dev/null 2> "$tmp/ck.err" || fail "no checkpoint to read: $(cat "$tmp/ck.err")"
ckpt="$tmp/ck/ckpt-000000000020.cohort"
/usr/bin/python3 -c "import numpy as np; np.save('$tmp/x.npy', np.ones((2, 100), np.float32))"
for target in "${special[@]}"; do
  kind=$(stat -c %F "$target")
  want="cannot write $target: it is "
  for flag in report timeline; do
    expect_refused_text "train --$flag at $kind" "--$flag: $want" \
      "$cohort" train --job="$tmp/job.textproto" --quiet "--$flag=$target"
  done
  expect_refused_text "local --report at $kind" "--report: $want" \
    "$cohort" local --job="$tmp/job.textproto" --workers=1 --report="$target"
  expect_refused_text "coordinator --report at $kind" "--report: $want" \
    "$cohort" coordinator --job="$tmp/job.textproto" --listen=127.0.0.1:0 --report="$target"
  expect_refused_text "worker --timeline at $kind" "--timeline: $want" \
    "$cohort" worker --coordinator=127.0.0.1:1 --timeline="$target"
  expect_refused_text "export --out at $kind" "--out: $want" \
    "$cohort" export --checkpoint="$ckpt" --format=onnx --out="$target"
  expect_refused_text "evaluate --confusion at $kind" "--confusion: $want" \
    "$cohort" evaluate --checkpoint="$ckpt" --confusion="$target"
  after=$(stat -c %F "$target")
  [[ "$after" == "$kind" ]] && ok "$target is still a $kind" ||
    fail "$target was a $kind and is now a $after"
done
[[ $(cat "$tmp/a_file") == "" ]] && ok "the link's target is untouched" ||
  fail "the link's target was written: $(head -c 100 "$tmp/a_file")"
# predict wants .npy or .csv names.
mkfifo "$tmp/fifo.npy"
expect_refused_text "predict --out at a FIFO" "--out: cannot write $tmp/fifo.npy: it is a FIFO" \
  "$cohort" predict --checkpoint="$ckpt" --input="$tmp/x.npy" --out="$tmp/fifo.npy"
[[ -p "$tmp/fifo.npy" ]] && ok "predict left the FIFO alone" || fail "predict replaced the FIFO"
# --export's name must end in .onnx or .safetensors.
mkfifo "$tmp/fifo.onnx"
expect_refused_text "train --export at a FIFO" "--export: cannot write $tmp/fifo.onnx: it is a FIFO" \
  "$cohort" train --job="$tmp/job.textproto" --quiet --export="$tmp/fifo.onnx"

# An output that is one of the command's inputs, by identity.
cp "$ckpt" "$tmp/only.cohort"
sum=$(md5sum < "$tmp/only.cohort")
expect_refused_text "export over its own checkpoint" \
  "--out: $tmp/only.cohort is the --checkpoint file, which this command reads; write the output elsewhere" \
  "$cohort" export --checkpoint="$tmp/only.cohort" --format=safetensors --out="$tmp/only.cohort"
expect_refused_text "export over its own checkpoint, spelled another way" \
  "--out: $tmp/./only.cohort is the --checkpoint file" \
  "$cohort" export --checkpoint="$tmp/only.cohort" --format=safetensors --out="$tmp/./only.cohort"
[[ $(md5sum < "$tmp/only.cohort") == "$sum" ]] && ok "the checkpoint is untouched" ||
  fail "the checkpoint was overwritten"
expect_refused_text "export into the checkpoint directory under a checkpoint's name" \
  "--out: $tmp/ck/ckpt-000000000099.cohort is named like a checkpoint in $tmp/ck" \
  "$cohort" export --checkpoint="$tmp/ck" --format=safetensors --out="$tmp/ck/ckpt-000000000099.cohort"
sum=$(md5sum < "$tmp/x.npy")
expect_refused_text "predict over its own input" \
  "--out: $tmp/x.npy is the --input file, which this command reads" \
  "$cohort" predict --checkpoint="$ckpt" --input="$tmp/x.npy" --out="$tmp/x.npy"
ln "$tmp/x.npy" "$tmp/x_hard.npy"
expect_refused_text "predict over a hard link of its input" \
  "--out: $tmp/x_hard.npy is the --input file" \
  "$cohort" predict --checkpoint="$ckpt" --input="$tmp/x.npy" --out="$tmp/x_hard.npy"
[[ $(md5sum < "$tmp/x.npy") == "$sum" ]] && ok "the input is untouched" ||
  fail "the input was overwritten"
expect_refused_text "train --report over its job spec" \
  "--report: $tmp/job.textproto is the --job file, which this command reads" \
  "$cohort" train --job="$tmp/job.textproto" --quiet --report="$tmp/job.textproto"
expect_refused_text "train --report and --timeline in one file" \
  "--timeline: $tmp/r.json is also the file of --report" \
  "$cohort" train --job="$tmp/job.textproto" --quiet --report="$tmp/r.json" --timeline="$tmp/r.json"

# The report's directory disappears while the job runs: the coordinator's
# exit says so instead of 0.
mkdir -p "$tmp/gone"
port=$(free_port)
"$cohort" coordinator --job="$tmp/job.textproto" --listen="127.0.0.1:$port" \
  --report="$tmp/gone/report.json" > "$tmp/coordinator.log" 2>&1 &
coord=$!
pids+=("$coord")
wait_for 20 "$cohort" status --coordinator="127.0.0.1:$port" || fail "no coordinator"
rm -rf "$tmp/gone"
"$cohort" worker --coordinator="127.0.0.1:$port" --devices=cpu:1 --quiet \
  > "$tmp/worker.log" 2>&1
wait "$coord"
rc=$?
if [[ $rc != 0 ]] && grep -q "report" "$tmp/coordinator.log"; then
  ok "a report lost at the end is a non-zero exit ($rc)"
else
  fail "coordinator exit $rc with its report lost: $(tail -3 "$tmp/coordinator.log")"
fi
finish
