#!/usr/bin/env bash
# The training flags are one set: every command that trains lists each of
# them in its --help (with its type and default), and the commands that
# serve a coordinator list the worker counts; every command answers
# --version. Then what those flags do in one process: --max-steps=0 trains
# nothing and still exports, a finished checkpoint says so instead of
# printing zeros, train serves --metrics-listen, a spec field's typo names
# the field meant, and predict's CSV names an image folder's classes.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
make_images="$2"

# 1. --help of every command.
shared=(epochs max-steps checkpoint-dir init-from export report quiet metrics-listen log-dir)
for command in train local worker launch; do
  help=$("$cohort" "$command" --help 2>&1)
  missing=()
  for flag in "${shared[@]}"; do
    grep -qE -- "^  --$flag(=[A-Z:]+)? " <<< "$help" || missing+=("--$flag")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    ok "cohort $command --help lists every training flag"
  else
    fail "cohort $command --help lacks ${missing[*]}"
  fi
done
for command in coordinator local launch; do
  help=$("$cohort" "$command" --help 2>&1)
  if grep -q -- '--workers=INT' <<< "$help" && grep -q -- '--min-workers=INT' <<< "$help" \
      && grep -q -- '--max-workers=INT' <<< "$help"; then
    ok "cohort $command --help lists --workers, --min-workers, --max-workers"
  else
    fail "cohort $command --help lacks the worker counts: $help"
  fi
done
help=$("$cohort" train --help)
if grep -q -- '--epochs=INT .*(default: the spec'"'"'s)' <<< "$help" \
    && grep -q -- '--max-steps=INT .*(default: -1)' <<< "$help" \
    && grep -q -- '--export=FILE' <<< "$help" && ! grep -q 'VALUE' <<< "$help"; then
  ok "--help names each argument's type and default"
else
  fail "--help types and defaults: $help"
fi

# 2. --version, on every command.
for command in "" train local coordinator worker launch ps status metrics stop \
    checkpoint export predict evaluate; do
  out=$("$cohort" $command --version 2>&1)
  if [[ $? -eq 0 && "$out" == "cohort "[0-9]* && "$out" == *"git commit: "* \
      && "$out" == *"GPU plugin: "* ]]; then
    :
  else
    fail "cohort $command --version: $out"
  fi
done
ok "--version on every command: $("$cohort" --version | tr '\n' ' ')"

# 3. What the flags do.
job="$tmp/job.textproto"
cat > "$job" <<'SPEC'
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 256 test_samples: 64 } }
batch_size: 32
epochs: 1
optimizer { lr: 0.05 }
SPEC
out=$("$cohort" train --job="$job" --max-steps=0 --export="$tmp/zero.safetensors" --quiet 2>&1)
if [[ $? -eq 0 && "$out" == *"no step trained (--max-steps=0)"* && -s "$tmp/zero.safetensors" \
    && "$out" == *"step-0 model"* ]]; then
  ok "--max-steps=0 trains nothing and exports the starting model"
else
  fail "--max-steps=0: $out"
fi
"$cohort" train --job="$job" --checkpoint-dir="$tmp/ck" --quiet > "$tmp/first.out" 2>&1 \
  || fail "first run: $(cat "$tmp/first.out")"
out=$("$cohort" train --job="$job" --checkpoint-dir="$tmp/ck" --quiet 2>&1)
if [[ $? -eq 0 && "$out" == *"nothing left to train: the checkpoint at step 8 already finished the job"* \
    && "$out" != *"0 samples/s"* ]]; then
  ok "a finished checkpoint: $(grep 'nothing left' <<< "$out")"
else
  fail "a finished checkpoint: $out"
fi
out=$("$cohort" train --job="$job" --checkpoint-dir="$tmp/ck" --epochs=2 --devices=cpu:2 --quiet 2>&1)
if [[ $? -eq 0 && "$out" == *"resuming from step 8"* \
    && "$out" == *"the global batch changes on resume"*"multiply optimizer.lr by 2"* ]]; then
  ok "resuming with another global batch says so: $(grep 'global batch' <<< "$out")"
else
  fail "global batch on resume: $out"
fi
# --metrics-listen on train, as on a worker: the run's progress at /metrics.
sed 's/^epochs: 1/epochs: 100000/' "$job" > "$tmp/long.textproto"
mport=$(free_port)
"$cohort" train --job="$tmp/long.textproto" --metrics-listen="127.0.0.1:$mport" --quiet \
  > /dev/null 2>&1 & trainer=$!; pids+=($trainer)
scrape() {
  /usr/bin/python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$mport/metrics', timeout=2).read().decode())"
}
stepping() { scrape | grep -qE '^cohort_worker_step [1-9]'; }
if wait_for 30 stepping; then
  ok "train --metrics-listen: $(scrape | grep '^cohort_worker_step ')"
else
  fail "train --metrics-listen serves no progress: $(scrape 2>&1 | head -5)"
fi
kill $trainer 2>/dev/null; wait $trainer 2>/dev/null
sed 's/^batch_size: 32/batch_sizee: 32/' "$job" > "$tmp/typo.textproto"
expect_refused_text "a spec field's typo" 'has no field named "batch_sizee"; did you mean "batch_size"?' \
  "$cohort" train --job="$tmp/typo.textproto"
printf 'model { zoo: "mlp_seed" }\nlayers_x: 1\n' > "$tmp/far.textproto"
expect_refused_text "a field with no near name" 'has no field named "layers_x"' \
  "$cohort" train --job="$tmp/far.textproto"
expect_refused_text "a flag's typo" 'unknown flag --max-step for "cohort train": did you mean --max-steps?' \
  "$cohort" train --job="$job" --max-step=3
expect_refused_text "--workers with --max-workers" '--workers=N sets both the minimum and the maximum' \
  "$cohort" coordinator --job="$job" --workers=2 --max-workers=3
# predict --streams: an --input array's batches on two copies of the model
# give the outputs of one; a data set split runs on one copy.
/usr/bin/python3 -c "import numpy as np; np.save('$tmp/x.npy', np.random.default_rng(0).normal(size=(40, 100)).astype(np.float32))"
for s in 1 2; do
  "$cohort" predict --checkpoint="$tmp/ck" --input="$tmp/x.npy" --out="$tmp/y$s.npy" \
    --batch=4 --threads=2 --streams=$s > "$tmp/streams.out" 2>&1 \
    || fail "predict --streams=$s: $(cat "$tmp/streams.out")"
done
if cmp -s "$tmp/y1.npy" "$tmp/y2.npy"; then
  ok "predict --streams=2 gives the outputs of --streams=1"
else
  fail "predict --streams=2 differs from --streams=1"
fi
expect_refused_text "--streams on a split" \
  '--streams: only an --input array'"'"'s batches run on several copies' \
  "$cohort" predict --checkpoint="$tmp/ck" --out="$tmp/split.csv" --streams=2
expect_refused_text "--streams with --prompt" \
  '--streams: text generation runs one copy of the model' \
  "$cohort" predict --checkpoint="$tmp/ck" --prompt=ab --streams=2
# A launched job's counts cannot leave out a launched task; every rank
# says so before it starts.
expect_refused_text "launch --max-workers below WORLD_SIZE" \
  '--max-workers=1 is less than the 2 launched tasks (WORLD_SIZE)' \
  env MASTER_ADDR=127.0.0.1 MASTER_PORT=1 RANK=1 WORLD_SIZE=2 \
  "$cohort" launch --job="$job" --max-workers=1

# 4. predict's CSV names an image folder's classes (its folders' names).
"$make_images" --out="$tmp/images" --classes=3 --train=8 --val=2 --width=12 --height=12 >/dev/null
cat > "$tmp/images.textproto" <<SPEC
model {
  layers { flatten {} }
  layers { linear { out_features: 3 } }
}
data { kind: IMAGE_FOLDER dir: "$tmp/images" image_folder { classes: 3 image_size: 8 } }
batch_size: 8
max_steps: 2
optimizer { lr: 0.01 }
SPEC
"$cohort" train --job="$tmp/images.textproto" --checkpoint-dir="$tmp/ick" --quiet > "$tmp/itrain.out" 2>&1 \
  || fail "image folder training: $(cat "$tmp/itrain.out")"
"$cohort" predict --checkpoint="$tmp/ick" --out="$tmp/top.csv" --top-k=2 > "$tmp/predict.out" 2>&1 \
  || fail "predict: $(cat "$tmp/predict.out")"
header=$(head -1 "$tmp/top.csv")
row=$(sed -n 2p "$tmp/top.csv")
if [[ "$header" == "index,label,label_name,class_1,name_1,prob_1,class_2,name_2,prob_2" \
    && "$row" =~ ^0,0,class_00,[0-2],class_0[0-2],[0-9.e-]+,[0-2],class_0[0-2], ]]; then
  ok "predict names the classes: $header / $row"
else
  fail "predict's CSV: $header / $row"
fi

finish
