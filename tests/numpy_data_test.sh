#!/usr/bin/env bash
# Your own arrays (data kind NUMPY): .npy files the test writes (by hand,
# tests/make_npy.py, no NumPy needed) train end to end with `cohort train`
# and a 2-worker `cohort local` job, and bad files are one line, exit 2.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
make_npy="$(dirname "${BASH_SOURCE[0]}")/make_npy.py"
data="$tmp/npy"
mkdir -p "$data"
/usr/bin/python3 "$make_npy" "$data" 16 4 2 600 200

spec() {  # spec TRAIN_X0: a job over the two shards, the first one replaceable
  cat <<SPEC
name: "npy"
model {
  layers { linear { out_features: 32 } }
  layers { relu {} }
  layers { linear { out_features: 4 } }
}
data {
  kind: NUMPY
  dir: "$data"
  numpy {
    shape: 16 classes: 4
    train_x: "$1" train_x: "train_x_1.npy"
    train_y: "train_y_0.npy" train_y: "train_y_1.npy"
    test_x: "test_x.npy" test_y: "test_y.npy"
  }
}
batch_size: 32
epochs: 3
optimizer { lr: 0.05 momentum: 0.9 }
SPEC
}
spec train_x_0.npy > "$tmp/job.textproto"

expect_accuracy 95 "cohort train on 2 .npy shards (1,200 samples of [16], 4 classes)" \
  "$cohort" train --job="$tmp/job.textproto" --quiet
expect_accuracy 95 "2-worker cohort local on .npy files" \
  "$cohort" local --job="$tmp/job.textproto" --workers=2

# Bad files: one line naming the file and what is wrong, exit 2.
expect_bad() {  # expect_bad FILE-IN-PLACE-OF-TRAIN_X_0 TEXT
  spec "$1" > "$tmp/bad_$1.textproto"
  expect_refused_text "$1" "$2" "$cohort" train --job="$tmp/bad_$1.textproto"
}
head -c 20000 "$data/train_x_0.npy" > "$data/truncated.npy"
expect_bad truncated.npy "truncated.npy: 20000 bytes where its header (float32, shape (600, 16)) implies 38528 (truncated)"
printf 'PK\003\004 not an npy' > "$data/zip.npy"
expect_bad zip.npy "zip.npy: not a valid .npy file"
expect_bad test_y.npy "test_y.npy: inputs are int64"
expect_bad missing.npy "missing.npy"
cp "$data/test_x.npy" "$data/short.npy"
expect_bad short.npy "train_y_0.npy: labels of shape (600) for 200 inputs"

finish
