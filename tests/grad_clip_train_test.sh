#!/usr/bin/env bash
# Gradient clipping in training (CPU replicas). A max norm far
# above the gradient's trains bit for bit as no clipping; a small one (and
# clip_grad_value) changes the run, which repeats exactly; PS mode and a
# negative value are refused at the spec line.
#
# usage: grad_clip_train_test.sh COHORT
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cohort=$(readlink -f "$1")

spec() {  # spec OPTIMIZER-EXTRA > file
  cat <<SPEC
name: "clip"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 1024 test_samples: 256 } }
batch_size: 16
epochs: 2
optimizer { lr: 0.5 momentum: 0.9 $1 }
SPEC
}
final_loss() {  # final_loss SPEC: the report's final loss, all its digits
  "$cohort" train --job="$1" --devices=cpu:2 --quiet --report="$1.json" >/dev/null 2>&1
  /usr/bin/python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print(repr(r['final_loss']), '%.4f' % r['test_accuracy'])" "$1.json" 2>/dev/null
}
spec "" > "$tmp/none.textproto"
spec "clip_grad_norm: 1e9" > "$tmp/huge.textproto"
spec "clip_grad_norm: 0.05" > "$tmp/small.textproto"
spec "clip_grad_value: 0.001" > "$tmp/value.textproto"
none=$(final_loss "$tmp/none.textproto")
huge=$(final_loss "$tmp/huge.textproto")
small=$(final_loss "$tmp/small.textproto")
again=$(final_loss "$tmp/small.textproto")
value=$(final_loss "$tmp/value.textproto")
if [[ -n "$none" && "$none" == "$huge" ]]; then
  ok "clip_grad_norm far above the gradient's norm trains as no clipping (final loss, test accuracy: $none)"
else
  fail "clip_grad_norm 1e9 '$huge' against no clipping '$none' (want equal)"
fi
if [[ -n "$small" && "$small" != "$none" && "$small" == "$again" && -n "$value" && "$value" != "$none" ]]; then
  ok "clip_grad_norm 0.05 changes the run ($small) and repeats exactly; clip_grad_value 0.001 too ($value)"
else
  fail "clip_grad_norm 0.05: '$small' then '$again'; clip_grad_value 0.001: '$value'; none '$none'"
fi

spec "clip_grad_norm: 1" > "$tmp/ps.textproto"
printf 'mode: PS\nps { consistency: SSP shards: 1 }\n' >> "$tmp/ps.textproto"
out=$("$cohort" train --job="$tmp/ps.textproto" 2>&1)
rc=$?
if [[ $rc -ne 0 && "$out" == *ps.textproto:6:*optimizer.clip_grad_norm*"needs all-reduce mode"* ]]; then
  ok "PS mode refuses clipping at its line: $out"
else
  fail "PS mode with clip_grad_norm: exit $rc: $out"
fi
spec "clip_grad_norm: -1" > "$tmp/neg.textproto"
out=$("$cohort" train --job="$tmp/neg.textproto" 2>&1)
[[ "$out" == *"optimizer.clip_grad_norm must be >= 0, got -1"* ]] \
  && ok "a negative clip_grad_norm: $out" || fail "negative clip_grad_norm: $out"
finish
