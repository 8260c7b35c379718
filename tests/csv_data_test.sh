#!/usr/bin/env bash
# Your own table (data kind CSV): CSV files the test writes train end to
# end with `cohort train` (standardised) and a 2-worker `cohort local` job,
# and a bad cell is one line naming the file, line and column, exit 2.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"

# Three classes by which of three noisy, differently scaled features is
# largest once centred: learnable, but only after standardisation is it
# easy for a small model.
/usr/bin/python3 - "$tmp" <<'PY'
import random, sys
out = sys.argv[1]
rng = random.Random(3)
scale = [1.0, 100.0, 0.01]
def table(path, n):
    with open(path, "w") as f:
        f.write("f0,label,f1,f2\n")
        for _ in range(n):
            c = rng.randrange(3)
            x = [rng.gauss(0, 0.3) + (1.5 if j == c else 0) for j in range(3)]
            f.write("%g,%d,%g,%g\n" % (x[0] * scale[0], c, x[1] * scale[1], x[2] * scale[2]))
table(out + "/train_a.csv", 600)
table(out + "/train_b.csv", 600)
table(out + "/test.csv", 300)
PY

cat > "$tmp/job.textproto" <<SPEC
name: "csv"
model {
  layers { linear { out_features: 16 } }
  layers { relu {} }
  layers { linear { out_features: 3 } }
}
data {
  kind: CSV
  dir: "$tmp"
  csv { train: "train_a.csv" train: "train_b.csv" test: "test.csv"
        target: "label" classes: 3 features: 3 standardize: true }
}
batch_size: 32
epochs: 4
optimizer { lr: 0.05 momentum: 0.9 }
SPEC

expect_accuracy 90 "cohort train on 2 CSV files (1,200 rows, 3 features, standardised)" \
  "$cohort" train --job="$tmp/job.textproto" --quiet
expect_accuracy 90 "2-worker cohort local on CSV" \
  "$cohort" local --job="$tmp/job.textproto" --workers=2

# A bad cell, a missing target column, a class out of range.
expect_bad() {  # expect_bad NAME TEXT: train_b.csv replaced by NAME
  sed "s|train: \"train_b.csv\"|train: \"$1\"|" "$tmp/job.textproto" > "$tmp/bad_$1.textproto"
  expect_refused_text "$1" "$2" "$cohort" train --job="$tmp/bad_$1.textproto"
}
sed '7s/^[^,]*,/oops,/' "$tmp/train_b.csv" > "$tmp/cell.csv"
expect_bad cell.csv "cell.csv:7: column 1 ('f0'): 'oops' is not a finite number"
sed '1s/label/class/' "$tmp/train_b.csv" > "$tmp/header.csv"
expect_bad header.csv "header.csv:1: no column named 'label'"
printf 'f0,label,f1,f2\n1,7,2,3\n' > "$tmp/class.csv"
expect_bad class.csv "class.csv:2: column 2 ('label'): '7' is not a class in [0, data.csv.classes = 3)"

finish
