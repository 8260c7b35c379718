#!/usr/bin/env bash
# The spec's optimizer.scale_lr_with_world applies the linear scaling rule.
# A run on 2 replicas with lr 0.025 scaled must train exactly as one with
# lr 0.05 unscaled (bit for bit: the same rate reaches the same kernels),
# and differently from 0.025 unscaled; the worker reports the effective rate
# (cohort_worker_learning_rate) to the coordinator's /metrics.
#
# usage: lr_scaling_test.sh COHORT
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cohort=$(readlink -f "$1")

spec() {  # spec LR SCALE > file
  cat <<SPEC
name: "scaling"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 1024 test_samples: 256 } }
batch_size: 16
epochs: 2
optimizer { lr: $1 momentum: 0.9 scale_lr_with_world: $2 }
lr_schedule { kind: ONE_CYCLE }
SPEC
}
final_loss() {  # the report's final loss, all its digits
  "$cohort" train --job="$1" --devices=cpu:2 --quiet --report="$1.json" >/dev/null 2>&1
  /usr/bin/python3 -c "import json, sys; print(repr(json.load(open(sys.argv[1]))['final_loss']))" "$1.json" 2>/dev/null
}
spec 0.025 true > "$tmp/scaled.textproto"
spec 0.05 false > "$tmp/plain.textproto"
spec 0.025 false > "$tmp/small.textproto"
scaled=$(final_loss "$tmp/scaled.textproto")
plain=$(final_loss "$tmp/plain.textproto")
small=$(final_loss "$tmp/small.textproto")
if [[ -n "$scaled" && "$scaled" == "$plain" && "$scaled" != "$small" ]]; then
  ok "lr 0.025 scaled on 2 replicas trains as lr 0.05 (the same final loss in the report, $scaled), not as 0.025 unscaled ($small)"
else
  fail "scaled '$scaled', lr 0.05 '$plain', lr 0.025 '$small' (want the first two equal and the third different)"
fi
final_lr() { /usr/bin/python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['final_lr'])" "$1.json" 2>/dev/null; }
lr_scaled=$(final_lr "$tmp/scaled.textproto")
lr_plain=$(final_lr "$tmp/plain.textproto")
lr_small=$(final_lr "$tmp/small.textproto")
if [[ -n "$lr_scaled" && "$lr_scaled" != None && "$lr_scaled" == "$lr_plain" && "$lr_scaled" != "$lr_small" ]]; then
  ok "the report's final_lr (one-cycle's last step): scaled $lr_scaled = lr 0.05's, unscaled 0.025 $lr_small"
else
  fail "final_lr: scaled '$lr_scaled', lr 0.05 '$lr_plain', lr 0.025 '$lr_small'"
fi

# The effective rate in the coordinator's metrics, 2 workers x 1 replica.
sed -e 's/epochs: 2/epochs: 200/' "$tmp/scaled.textproto" > "$tmp/long.textproto"
printf 'lr_schedule { kind: CONSTANT }\ncluster { min_workers: 2 max_workers: 2 }\n' >> "$tmp/long.textproto"
sed -i '/kind: ONE_CYCLE/d' "$tmp/long.textproto"
port=$(free_port) mport=$(free_port)
"$cohort" coordinator --job="$tmp/long.textproto" --listen="127.0.0.1:$port" \
  --metrics-listen="127.0.0.1:$mport" 2>"$tmp/coord.err" &
pids+=($!)
for i in 1 2; do
  "$cohort" worker --coordinator="127.0.0.1:$port" --quiet --min-step-ms=5 2>/dev/null &
  pids+=($!)
done
rate() {
  lr=$(/usr/bin/python3 - "$mport" <<'PY'
import re, sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=2).read().decode()
rates = re.findall(r'^cohort_worker_learning_rate\{[^}]*\} (\S+)$', text, re.M)
print(" ".join(rates))
sys.exit(0 if len(rates) == 2 and all(abs(float(r) - 0.05) < 1e-7 for r in rates) else 1)
PY
)
}
if wait_for 40 rate; then
  ok "cohort_worker_learning_rate on both workers: $lr (0.025 x 2 replicas)"
else
  fail "cohort_worker_learning_rate: '${lr:-}' (want 0.05 on both workers)"
fi
"$cohort" stop --coordinator="127.0.0.1:$port" >/dev/null 2>&1
finish
