#!/usr/bin/env bash
# AUC and normalized entropy end to end, on a click-through-rate job (a CSV
# table with one 0/1 label, loss BCE_WITH_LOGITS): the report, the result
# line, eval.csv and the best checkpoint by eval.metric auc (cohort train on
# two CPU replicas); `cohort evaluate` against NumPy's values from the
# logits `cohort predict` writes; a 2-worker `cohort local` job, whose
# workers gather every score; `cohort status` and Prometheus /metrics while
# a job runs; and the spec refusing auc where the job has no such metric.
#
# usage: ctr_metrics_test.sh COHORT
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
py=/usr/bin/python3

# 8 features, a click with probability sigmoid(w.x - 1.5) (about a quarter
# of the samples), fixed seed.
$py - "$tmp/ctr" <<'PY'
import os, sys
import numpy as np
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(11)
w = rng.normal(0, 1, 8)
for name, n in (("train", 3000), ("test", 600)):
    x = rng.normal(0, 1, (n, 8))
    y = rng.random(n) < 1 / (1 + np.exp(1.5 - x @ w))
    with open(os.path.join(out, name + ".csv"), "w") as f:
        f.write(",".join(["f%d" % i for i in range(8)] + ["click"]) + "\n")
        for row, label in zip(x, y):
            f.write(",".join("%.5f" % v for v in row) + ",%d\n" % label)
PY

spec() {  # spec CHECKPOINT_DIR [LOSS]
  cat <<SPEC
name: "ctr"
model {
  layers { linear { out_features: 16 } }
  layers { relu {} }
  layers { linear { out_features: 1 } }
}
data { kind: CSV dir: "$tmp/ctr" csv { train: "train.csv" test: "test.csv"
       target: "click" regression: true features: 8 } }
loss: ${2:-BCE_WITH_LOGITS}
batch_size: 32
epochs: 4
optimizer { kind: ADAM lr: 0.01 }
eval { every_steps: 40 metric: "auc" }
checkpoint { dir: "$1" every_steps: 100 keep_best: true }
seed: 3
SPEC
}
report_metric() {  # report_metric FILE NAME: test_metrics.NAME of a report
  $py -c 'import json, sys; print(json.load(open(sys.argv[1]))["test_metrics"].get(sys.argv[2], "none"))' "$1" "$2" 2>&1
}
between() {  # between VALUE LOW HIGH
  awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v + 0 == v && v > lo && v < hi) }'
}
near() {  # near A B TOLERANCE
  awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a + 0 == a && d <= t) }'
}

# 1. cohort train on two CPU replicas.
spec "$tmp/ckpt" > "$tmp/ctr.textproto"
"$cohort" train --job="$tmp/ctr.textproto" --devices=cpu:2 --quiet \
  --report="$tmp/train.json" --log-dir="$tmp/logs" > "$tmp/train.out" 2>&1 ||
  fail "cohort train: exit $?: $(tail -3 "$tmp/train.out")"
auc=$(report_metric "$tmp/train.json" auc)
ne=$(report_metric "$tmp/train.json" normalized_entropy)
if between "$auc" 0.75 1 && between "$ne" 0 0.95; then
  ok "the report's test_metrics: auc $auc, normalized_entropy $ne"
else
  fail "the report's test_metrics: auc '$auc', normalized_entropy '$ne'"
fi
grep -q "test auc .* | test normalized_entropy " "$tmp/train.out" &&
  ok "the result line: $(grep 'test auc' "$tmp/train.out" | tail -1)" ||
  fail "no auc on the result line: $(tail -2 "$tmp/train.out")"
header=$(head -1 "$tmp/logs/eval.csv" 2>/dev/null)
[[ "$header" == *",auc,normalized_entropy"* ]] &&
  ok "eval.csv: $header ($(($(wc -l < "$tmp/logs/eval.csv") - 1)) evaluations)" ||
  fail "eval.csv header: '$header'"
best=$($py -c 'import json, sys; b = json.load(open(sys.argv[1])); print(b["metric"], b["step"])' \
  "$tmp/ckpt/best/best.json" 2>&1)
[[ "$best" =~ ^auc\ [0-9]+$ ]] && ok "keep_best by auc: best.json says $best" ||
  fail "best.json: '$best'"

# 2. cohort evaluate against NumPy on cohort predict's logits (same model,
# same batches, so the same logits).
"$cohort" predict --checkpoint="$tmp/ckpt" --out="$tmp/logits.npy" \
  > "$tmp/predict.out" 2>&1 || fail "cohort predict: $(tail -2 "$tmp/predict.out")"
want=$($py - "$tmp/logits.npy" "$tmp/ctr/test.csv" <<'PY'
import sys
import numpy as np
z = np.load(sys.argv[1]).astype(np.float64).reshape(-1)
y = np.loadtxt(sys.argv[2], delimiter=",", skiprows=1)[:, -1]
# AUC as the Mann-Whitney U from midranks (ties share their mean rank).
order = np.argsort(z, kind="mergesort")
ranks = np.empty(len(z))
sorted_z = z[order]
i = 0
while i < len(z):
    j = i
    while j + 1 < len(z) and sorted_z[j + 1] == sorted_z[i]:
        j += 1
    ranks[order[i:j + 1]] = (i + j) / 2 + 1
    i = j + 1
pos, neg = y.sum(), len(y) - y.sum()
auc = (ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg)
loss = np.mean(np.logaddexp(0, z) - y * z)
p = y.mean()
ne = loss / -(p * np.log(p) + (1 - p) * np.log(1 - p))
print("%.9f %.9f" % (auc, ne))
PY
)
line=$("$cohort" evaluate --checkpoint="$tmp/ckpt" 2>&1)
got_auc=$(sed -n 's/.* auc \([0-9.e-]*\).*/\1/p' <<< "$line")
got_ne=$(sed -n 's/.* normalized_entropy \([0-9.e-]*\).*/\1/p' <<< "$line")
if near "$got_auc" "${want% *}" 1e-5 && near "$got_ne" "${want#* }" 1e-5; then
  ok "cohort evaluate agrees with NumPy (auc, NE: $want): $line"
else
  fail "cohort evaluate: '$line'; NumPy on cohort predict's logits: '$want'"
fi

# 3. Two workers: each evaluates half the test set and gathers every score.
spec "$tmp/ckpt_local" > "$tmp/local.textproto"
"$cohort" local --job="$tmp/local.textproto" --workers=2 \
  --report="$tmp/local.json" > "$tmp/local.out" 2>&1 ||
  fail "cohort local: exit $?: $(tail -3 "$tmp/local.out")"
local_auc=$(report_metric "$tmp/local.json" auc)
line=$("$cohort" evaluate --checkpoint="$tmp/ckpt_local" 2>&1)
final_auc=$(sed -n 's/.* auc \([0-9.e-]*\).*/\1/p' <<< "$line")
# The same model evaluated in one process (in other batches: a logit may
# move by an ulp, and a near tie with it, so not to the last bit).
if between "$local_auc" 0.75 1 && near "$local_auc" "$final_auc" 1e-3; then
  ok "2-worker cohort local: auc $local_auc; cohort evaluate of its final model: $final_auc"
else
  fail "2-worker cohort local: auc '$local_auc', cohort evaluate: '$line'"
fi
grep -q "test auc " "$tmp/local.out" && ok "cohort local's result line shows auc" ||
  fail "no auc on cohort local's result line: $(tail -1 "$tmp/local.out")"

# 4. A running job's status and Prometheus metrics.
sed 's/epochs: 4/epochs: 40/' "$tmp/ctr.textproto" | grep -v '^checkpoint' > "$tmp/long.textproto"
addr="127.0.0.1:$(free_port)"
mport=$(free_port)
"$cohort" coordinator --job="$tmp/long.textproto" --listen="$addr" \
  --metrics-listen="127.0.0.1:$mport" 2> "$tmp/coord.err" &
coord=$!
pids+=($coord)
wait_for 15 "$cohort" status --coordinator="$addr"
"$cohort" worker --coordinator="$addr" --quiet --min-step-ms=5 2> "$tmp/worker.err" &
worker=$!
pids+=($worker)
evaluated() { "$cohort" status --coordinator="$addr" | grep -q "evaluation: .*auc .*normalized_entropy "; }
if wait_for 90 evaluated; then
  ok "cohort status: $("$cohort" status --coordinator="$addr" | grep evaluation:)"
  page=$($py -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' \
    "http://127.0.0.1:$mport/metrics" 2>&1)
  if grep -q 'cohort_worker_test_metric{.*metric="auc"}' <<< "$page" &&
     grep -q 'cohort_worker_test_metric{.*metric="normalized_entropy"}' <<< "$page"; then
    ok "Prometheus: cohort_worker_test_metric{metric=\"auc\"} and {metric=\"normalized_entropy\"}"
  else
    fail "no auc or normalized_entropy among cohort_worker_test_metric on /metrics"
  fi
else
  fail "cohort status never showed auc: $("$cohort" status --coordinator="$addr" 2>&1 | tail -5)"
fi
"$cohort" stop --coordinator="$addr" > /dev/null 2>&1
wait "$worker" "$coord" 2> /dev/null

# 5. A job without the metric: one line, exit 2.
spec "$tmp/ckpt_mse" MSE > "$tmp/mse.textproto"
expect_refused_text "eval.metric auc under MSE" \
  "eval.metric \"auc\" is not a metric this job's evaluation gives: one of loss, mse, mae, r2 (auc and normalized_entropy need loss BCE_WITH_LOGITS and one float target per sample)" \
  "$cohort" train --job="$tmp/mse.textproto"

finish
