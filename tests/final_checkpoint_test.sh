#!/usr/bin/env bash
# A run that ends with a checkpoint directory always leaves a
# checkpoint of its last step, which `cohort checkpoint verify` accepts:
# max_steps not a multiple of every_steps, every_seconds longer than the
# run, and --checkpoint-dir alone (no schedule in the spec). A run resumed
# from that final checkpoint goes on from its step. Checkpoints describe
# themselves (`cohort checkpoint show`).
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"

spec() {  # spec EXTRA-LINES: a 32-step (per epoch) synthetic job
  cat <<SPEC
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 256 test_samples: 16 } }
batch_size: 8
optimizer { lr: 0.1 }
$1
SPEC
}

# expect_final NAME DIR STEP: DIR's newest checkpoint is of STEP and every
# checkpoint there verifies.
expect_final() {
  local name=$1 dir=$2 step=$3 newest out rc
  newest=$(ls "$dir" 2>/dev/null | grep '^ckpt-.*\.cohort$' | sort | tail -1)
  out=$("$cohort" checkpoint verify "$dir" 2>&1)
  rc=$?
  if [[ $rc -eq 0 && "$newest" == "$(printf 'ckpt-%012d.cohort' "$step")" ]] &&
     grep -q "$newest .* OK$" <<< "$out"; then
    ok "$name: newest $newest verifies"
  else
    fail "$name: newest '$newest' (want step $step): $out"
  fi
}

spec "max_steps: 7
checkpoint { dir: \"$tmp/a\" every_steps: 5 }" > "$tmp/a.textproto"
"$cohort" train --job="$tmp/a.textproto" --quiet > /dev/null 2> "$tmp/a.err" ||
  fail "max_steps 7: $(cat "$tmp/a.err")"
expect_final "max_steps 7 with every_steps 5" "$tmp/a" 7
[[ -f "$tmp/a/ckpt-000000000005.cohort" ]] && ok "the periodic one of step 5 is kept too" ||
  fail "no checkpoint of step 5: $(ls "$tmp/a")"

spec "epochs: 1
checkpoint { dir: \"$tmp/b\" every_seconds: 3600 }" > "$tmp/b.textproto"
"$cohort" train --job="$tmp/b.textproto" --quiet > /dev/null 2> "$tmp/b.err" ||
  fail "every_seconds 3600: $(cat "$tmp/b.err")"
expect_final "every_seconds longer than the run" "$tmp/b" 32

spec "epochs: 1" > "$tmp/c.textproto"
"$cohort" train --job="$tmp/c.textproto" --checkpoint-dir="$tmp/c" --quiet \
  > /dev/null 2> "$tmp/c.err" || fail "--checkpoint-dir alone: $(cat "$tmp/c.err")"
expect_final "--checkpoint-dir alone" "$tmp/c" 32
[[ $(ls "$tmp/c" | grep -c '\.cohort$') == 1 ]] && ok "--checkpoint-dir alone keeps only the final one" ||
  fail "--checkpoint-dir alone wrote: $(ls "$tmp/c")"

# Two more epochs from the final checkpoint: the run goes on from step 32.
out=$("$cohort" train --job="$tmp/c.textproto" --checkpoint-dir="$tmp/c" \
  --epochs=3 2>&1)
if grep -q "resum.* step 32" <<< "$out"; then
  ok "resumed from the final checkpoint: $(grep -m1 "resum" <<< "$out")"
else
  fail "no resume from step 32: $(head -3 <<< "$out")"
fi
expect_final "after resuming for 2 more epochs" "$tmp/c" 96

# Resumed with nothing left to train: no new checkpoint, and no error.
before=$(ls "$tmp/c")
"$cohort" train --job="$tmp/c.textproto" --checkpoint-dir="$tmp/c" --epochs=3 \
  --quiet > /dev/null 2> "$tmp/again.err" || fail "nothing left: $(cat "$tmp/again.err")"
[[ "$(ls "$tmp/c")" == "$before" ]] && ok "a finished run resumed again writes nothing" ||
  fail "a finished run wrote again: $(ls "$tmp/c")"

# Self-describing: `cohort checkpoint show` prints the spec that wrote the
# checkpoint and each tensor's PyTorch-style name, shape and offset.
cat > "$tmp/d.textproto" <<SPEC
name: "described"
model {
  layers { linear { out_features: 32 } }
  layers { batchnorm1d {} }
  layers { relu {} }
  layers { linear { out_features: 10 } }
}
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 256 test_samples: 16 } }
batch_size: 8
max_steps: 3
optimizer { lr: 0.1 }
SPEC
"$cohort" train --job="$tmp/d.textproto" --checkpoint-dir="$tmp/d" --quiet \
  > /dev/null 2> "$tmp/d.err" || fail "described: $(cat "$tmp/d.err")"
"$cohort" checkpoint show "$tmp/d/ckpt-000000000003.cohort" > "$tmp/show.out" 2>&1
if /usr/bin/python3 - "$tmp/show.out" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
spec = text.split("job_spec:\n", 1)[1].split("state_names:\n", 1)[0]
names = json.loads(text.split("state_names:\n", 1)[1])
params = [(p["name"], p["shape"]) for p in names["params"]]
buffers = [(b["name"], b["shape"]) for b in names["buffers"]]
want_params = [("0.weight", [32, 100]), ("0.bias", [32]), ("1.weight", [32]),
               ("1.bias", [32]), ("3.weight", [10, 32]), ("3.bias", [10])]
want_buffers = [("1.running_mean", [32]), ("1.running_var", [32])]
offsets = [p["offset"] for p in names["params"]]
ok = (params == want_params and buffers == want_buffers and
      offsets == sorted(offsets) and 'name: "described"' in spec and
      "batchnorm1d" in spec and "tensor params [" in text)
sys.exit(0 if ok else print(params, buffers, offsets, spec) or 1)
PY
then ok "checkpoint show: the spec and PyTorch-style names (0.weight ... 1.running_var)"
else fail "checkpoint show: $(head -c 600 "$tmp/show.out")"
fi
expect_refused_text "checkpoint show of a missing file" "no-such.cohort" \
  "$cohort" checkpoint show "$tmp/no-such.cohort"

finish
