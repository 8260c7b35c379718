#!/usr/bin/env bash
# Targets and losses end to end: the shipped Conv1d regression example
# on .npy files (cohort train and a 2-worker cohort local job) and on .npz
# archives, a CSV regression under MSE, L1 and Huber (and through a PS
# shard), multi-label BCE, and label smoothing with top-5 accuracy;
# R² is checked against the test targets' variance computed by NumPy, and
# every bad combination is one line, exit 2.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
examples="$(dirname "${BASH_SOURCE[0]}")/../examples"
make_tables="$(dirname "${BASH_SOURCE[0]}")/make_tables.py"
py=/usr/bin/python3

# report_metric FILE NAME: test_metrics.NAME of a JSON report.
report_metric() {
  $py -c 'import json, sys; print(json.load(open(sys.argv[1]))["test_metrics"].get(sys.argv[2], "none"))' "$1" "$2"
}

# expect_metric NAME METRIC MIN REPORT: the report's metric is at least MIN.
expect_metric() {
  local name=$1 metric=$2 min=$3 report=$4 v
  v=$(report_metric "$report" "$metric" 2>&1)
  if awk -v a="$v" -v m="$min" 'BEGIN { exit !(a + 0 == a && a >= m) }'; then
    ok "$name: test $metric $v (want >= $min)"
  else
    fail "$name: test $metric '$v' (want >= $min)"
  fi
}

# The founding workload: conv1d_bn on [3, 10000] with MSE, from .npy files.
$py "$examples/make_conv1d_data.py" "$tmp/c1d" > /dev/null
"$cohort" train --job="$examples/conv1d_regression.textproto" \
  --data-dir="$tmp/c1d" --devices=cpu:2 --quiet --report="$tmp/c1d.json" \
  > "$tmp/c1d.out" 2>&1 || fail "conv1d regression: exit $?: $(tail -3 "$tmp/c1d.out")"
expect_metric "conv1d_bn regression (examples/conv1d_regression.textproto)" r2 0.95 "$tmp/c1d.json"
grep -q "test R² " "$tmp/c1d.out" && ok "the result line shows R²" ||
  fail "no R² on the result line: $(tail -1 "$tmp/c1d.out")"

# R² is 1 - MSE / Var(y) over every test target element: recompute Var(y).
if $py - "$tmp/c1d.json" "$tmp/c1d/test_y.npy" <<'PY'
import json, sys
import numpy as np
m = json.load(open(sys.argv[1]))["test_metrics"]
var = np.load(sys.argv[2]).astype(np.float64).var()
want = 1 - m["mse"] / var
sys.exit(0 if abs(want - m["r2"]) < 1e-4 else print(m, want) or 1)
PY
then ok "R² = 1 - MSE / Var(y) with NumPy's variance of test_y.npy"
else fail "R² disagrees with 1 - MSE / Var(y)"
fi

sed 's/^epochs: .*/epochs: 3/' "$examples/conv1d_regression.textproto" > "$tmp/c1d_3.textproto"
"$cohort" local --job="$tmp/c1d_3.textproto" --workers=2 \
  --data-dir="$tmp/c1d" --report="$tmp/c1d_local.json" \
  > "$tmp/c1d_local.out" 2>&1 || fail "2-worker regression: exit $?: $(tail -3 "$tmp/c1d_local.out")"
expect_metric "2-worker cohort local regression, 3 epochs" r2 0.95 "$tmp/c1d_local.json"

# .npz archives: x and y in one file per shard.
$py "$examples/make_conv1d_data.py" "$tmp/npz" --train 256 --test 64 \
  --length 1000 --npz > /dev/null
npz_spec() {  # npz_spec TEST-FILE
  cat <<SPEC
name: "npz"
model {
  layers { conv1d { out_channels: 16 kernel: 3 padding: 1 } }
  layers { relu {} }
  layers { conv1d { out_channels: 3 kernel: 3 padding: 1 } }
}
data { kind: NUMPY dir: "$tmp/npz" numpy { shape: [3, 1000] target_shape: [3, 1000]
       train_x: ["train_0.npz", "train_1.npz"] test_x: "$1" } }
batch_size: 16
epochs: 8
optimizer { kind: ADAM lr: 0.01 }
SPEC
}
npz_spec test.npz > "$tmp/npz.textproto"
"$cohort" train --job="$tmp/npz.textproto" --quiet --report="$tmp/npz.json" \
  > "$tmp/npz.out" 2>&1 || fail "npz: exit $?: $(tail -3 "$tmp/npz.out")"
expect_metric ".npz archives (x and y in each)" r2 0.95 "$tmp/npz.json"
"$cohort" local --job="$tmp/npz.textproto" --workers=2 \
  --report="$tmp/npz_local.json" > "$tmp/npz_local.out" 2>&1 ||
  fail "npz, 2 workers: exit $?: $(tail -3 "$tmp/npz_local.out")"
expect_metric ".npz archives, 2-worker cohort local" r2 0.95 "$tmp/npz_local.json"

# A CSV regression under three losses.
$py "$make_tables" csv "$tmp/csv"
csv_spec() {  # csv_spec LOSS
  cat <<SPEC
name: "csv-regression"
model {
  layers { linear { out_features: 64 } }
  layers { relu {} }
  layers { linear { out_features: 1 } }
}
data { kind: CSV dir: "$tmp/csv" csv { train: "train.csv" test: "test.csv"
       target: "y" regression: true features: 8 standardize: true } }
batch_size: 32
epochs: 12
optimizer { kind: ADAM lr: 0.003 }
loss: $1
SPEC
}
for loss in MSE L1 HUBER; do
  csv_spec $loss > "$tmp/csv_$loss.textproto"
  "$cohort" train --job="$tmp/csv_$loss.textproto" --quiet \
    --report="$tmp/csv_$loss.json" > "$tmp/csv_$loss.out" 2>&1 ||
    fail "CSV $loss: exit $?: $(tail -3 "$tmp/csv_$loss.out")"
  expect_metric "CSV regression, loss $loss" r2 0.95 "$tmp/csv_$loss.json"
done

# Float targets through parameter-server shards (SSP, 2 workers).
{ cat "$tmp/csv_MSE.textproto"; printf 'mode: PS\nps { consistency: SSP staleness: 2 }\n'; } \
  > "$tmp/csv_ps.textproto"
"$cohort" local --job="$tmp/csv_ps.textproto" --workers=2 \
  --report="$tmp/csv_ps.json" > "$tmp/csv_ps.out" 2>&1 ||
  fail "PS regression: exit $?: $(tail -3 "$tmp/csv_ps.out")"
expect_metric "CSV regression through a PS shard, SSP, 2 workers" r2 0.95 "$tmp/csv_ps.json"

# A running job's status and Prometheus metrics carry the regression's
# metrics once an epoch is evaluated.
addr="127.0.0.1:$(free_port)"
mport=$(free_port)
"$cohort" coordinator --job="$tmp/csv_MSE.textproto" --listen="$addr" \
  --metrics-listen="127.0.0.1:$mport" 2> "$tmp/coord.err" &
coord=$!
wait_for 15 "$cohort" status --coordinator="$addr"
"$cohort" worker --coordinator="$addr" --quiet --min-step-ms=20 2> "$tmp/worker.err" &
worker=$!
evaluated() { "$cohort" status --coordinator="$addr" | grep -q "evaluation: loss .* | r2 "; }
if wait_for 60 evaluated; then
  ok "cohort status: $("$cohort" status --coordinator="$addr" | grep evaluation:)"
  if /usr/bin/python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' \
       "http://127.0.0.1:$mport/metrics" | grep -q 'cohort_worker_test_metric{.*metric="r2"}'; then
    ok "Prometheus: cohort_worker_test_metric{metric=\"r2\"}"
  else
    fail "no cohort_worker_test_metric{metric=\"r2\"} on /metrics"
  fi
else
  fail "cohort status never showed an evaluation with r2: $("$cohort" status --coordinator="$addr" 2>&1 | tail -5)"
fi
"$cohort" stop --coordinator="$addr" > /dev/null 2>&1
wait "$worker" "$coord" 2> /dev/null

# Multi-label classification: 4 independent binary labels, BCE with logits.
$py "$make_tables" multilabel "$tmp/ml"
cat > "$tmp/ml.textproto" <<SPEC
name: "multilabel"
model {
  layers { linear { out_features: 64 } }
  layers { relu {} }
  layers { linear { out_features: 4 } }
}
data { kind: NUMPY dir: "$tmp/ml" numpy { shape: 16 target_shape: 4
       train_x: "train_x.npy" train_y: "train_y.npy"
       test_x: "test_x.npy" test_y: "test_y.npy" } }
batch_size: 32
epochs: 10
optimizer { kind: ADAM lr: 0.003 }
loss: BCE_WITH_LOGITS
SPEC
"$cohort" train --job="$tmp/ml.textproto" --quiet --report="$tmp/ml.json" \
  > "$tmp/ml.out" 2>&1 || fail "multi-label: exit $?: $(tail -3 "$tmp/ml.out")"
expect_metric "multi-label BCE: per-label accuracy" accuracy 0.95 "$tmp/ml.json"

# Classification with label smoothing: accuracy and top-5 in the report.
cat > "$tmp/smooth.textproto" <<SPEC
name: "smoothing"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 classes: 10 train_samples: 4096
       test_samples: 1024 noise: 2.0 } }
batch_size: 32
epochs: 2
optimizer { kind: SGD lr: 0.05 momentum: 0.9 }
label_smoothing: 0.1
SPEC
"$cohort" train --job="$tmp/smooth.textproto" --quiet --report="$tmp/smooth.json" \
  > "$tmp/smooth.out" 2>&1 || fail "label smoothing: exit $?: $(tail -3 "$tmp/smooth.out")"
expect_metric "cross-entropy with label_smoothing 0.1: accuracy" accuracy 0.9 "$tmp/smooth.json"
expect_metric "cross-entropy with label_smoothing 0.1: top-5" top5_accuracy 0.99 "$tmp/smooth.json"

# Bad combinations: one line, exit 2.
sed 's/loss: MSE/loss: CROSS_ENTROPY/' "$tmp/csv_MSE.textproto" > "$tmp/bad_ce.textproto"
expect_refused_text "cross-entropy on float targets" \
  "loss CROSS_ENTROPY needs class labels, but the data has float targets" \
  "$cohort" train --job="$tmp/bad_ce.textproto"
sed 's/out_features: 1 }/out_features: 2 }/' "$tmp/csv_MSE.textproto" > "$tmp/bad_out.textproto"
expect_refused_text "a model output that does not fit the target" \
  "the model's output per sample is [2] but the data's float targets are [1]" \
  "$cohort" train --job="$tmp/bad_out.textproto"
sed 's/target_shape: 4/target_shape: 5/' "$tmp/ml.textproto" > "$tmp/bad_shape.textproto"
expect_refused_text "targets of another shape" \
  "train_y.npy: targets of shape (2000, 4) for 2000 inputs; data.numpy.target_shape asks for (2000, 5)" \
  "$cohort" train --job="$tmp/bad_shape.textproto"
$py -c 'import numpy as np; np.save("'"$tmp"'/ml/int_y.npy", np.zeros((2000, 4), np.int64))'
sed 's/train_y: "train_y.npy"/train_y: "int_y.npy"/' "$tmp/ml.textproto" > "$tmp/bad_int.textproto"
expect_refused_text "integer targets where floats are asked for" \
  "int_y.npy: targets are int64; with data.numpy.target_shape the targets are float32 or float16" \
  "$cohort" train --job="$tmp/bad_int.textproto"
$py -c 'import numpy as np; np.savez_compressed("'"$tmp"'/npz/z.npz", x=np.zeros((4, 3, 1000), np.float32), y=np.zeros((4, 3, 1000), np.float32))'
npz_spec z.npz > "$tmp/bad_z.textproto"
expect_refused_text "a compressed .npz" \
  "z.npz:x.npy is compressed (np.savez_compressed), which cannot be memory-mapped" \
  "$cohort" train --job="$tmp/bad_z.textproto"
npz_spec 'test.npz:inputs" test_y: "test.npz:y' > "$tmp/bad_member.textproto"
expect_refused_text "a missing .npz member" \
  "test.npz has no array \"inputs.npy\" (it holds: x.npy, y.npy)" \
  "$cohort" train --job="$tmp/bad_member.textproto"
printf 'PK\005\006 broken' > "$tmp/npz/broken.npz"
npz_spec broken.npz > "$tmp/bad_zip.textproto"
expect_refused_text "a broken .npz" "broken.npz: not a valid .npz (ZIP) archive" \
  "$cohort" train --job="$tmp/bad_zip.textproto"

finish
