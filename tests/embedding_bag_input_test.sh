#!/usr/bin/env bash
# Row ids an embedding bag cannot take, from data that does not check them
# (NUMPY arrays): training, evaluation and prediction stop with one line
# naming the layer, the feature and the row, exit 2, no crash. Skips
# without NumPy.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
py=/usr/bin/python3
if ! $py -c 'import numpy' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 lacks numpy"
  exit 0
fi

# 64 samples of [a feature, row / 2^24, row mod 2^24]; rows 0..9, a table
# of 10. bad.npy has row 12 in sample 37, half.npy a row of 2.5.
$py - "$tmp" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
n = 64
x = np.zeros((n, 3), np.float32)
x[:, 0] = np.random.RandomState(0).randn(n)
x[:, 2] = np.arange(n) % 10
np.save(f"{d}/good.npy", x)
np.save(f"{d}/y.npy", (np.arange(n) % 2).astype(np.float32).reshape(n, 1))
bad = x.copy()
bad[37, 2] = 12
np.save(f"{d}/bad.npy", bad)
half = x.copy()
half[5, 2] = 2.5
np.save(f"{d}/half.npy", half)
PY
job() {  # job TRAIN_X TEST_X
  cat <<SPEC
name: "bag-input"
model {
  layers { slice { begin: 1 end: 3 } }
  layers { embedding_bag { rows: [10] dim: 4 } }
  layers { linear { out_features: 1 } }
}
data { kind: NUMPY dir: "$tmp" numpy { shape: [3] target_shape: [1]
  train_x: "$1" train_y: "y.npy" test_x: "$2" test_y: "y.npy" } }
batch_size: 16
epochs: 1
optimizer { kind: ADAGRAD lr: 0.1 }
loss: BCE_WITH_LOGITS
SPEC
}
job good.npy good.npy > "$tmp/good.textproto"
job bad.npy good.npy > "$tmp/bad_train.textproto"
job good.npy bad.npy > "$tmp/bad_test.textproto"
job half.npy good.npy > "$tmp/half.textproto"

expect_refused "a row past its table in training" \
  "embedding_bag\(1 tables, dim 4, sum\): sample [0-9]+, categorical feature 0: row 12 is past its table's 10 rows" \
  "$cohort" train --job="$tmp/bad_train.textproto" --quiet
expect_refused "a row past its table in evaluation" "row 12 is past its table's 10 rows" \
  "$cohort" train --job="$tmp/bad_test.textproto" --quiet
expect_refused "a row that is not an integer" "is not a row id" \
  "$cohort" train --job="$tmp/half.textproto" --quiet
if "$cohort" train --job="$tmp/good.textproto" --quiet \
     --checkpoint-dir="$tmp/ck" > "$tmp/good.out" 2>&1; then
  ok "good ids train"
else
  fail "good ids: $(tail -2 "$tmp/good.out")"
fi
expect_refused "a row past its table in cohort predict" "row 12 is past its table's 10 rows" \
  "$cohort" predict --checkpoint="$tmp/ck" --input="$tmp/bad.npy" --out="$tmp/out.npy"
[[ ! -e "$tmp/out.npy" ]] && ok "no output file written" || fail "cohort predict wrote $tmp/out.npy"
finish
