#!/usr/bin/env bash
# `cohort evaluate` and `cohort predict` over a data split give
# what training reported. On MNIST's 10,000 test images (when the shared
# data is there; the built-in synthetic set otherwise): evaluate's loss and
# accuracy equal the training report's, its confusion matrix adds up to
# that accuracy, and predict's top-1 column scores it too. Bad input is
# one line, exit 2.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
py=/usr/bin/python3

if [[ -n "${COHORT_DATA_DIR:-}" && -f "$COHORT_DATA_DIR/mnist/t10k-labels-idx1-ubyte" ||
      -n "${COHORT_DATA_DIR:-}" && -f "$COHORT_DATA_DIR/mnist/t10k-labels-idx1-ubyte.gz" ]]; then
  data="data { kind: MNIST dir: \"$COHORT_DATA_DIR/mnist\" train_limit: 6000 }"
  what="MNIST (10,000 test images)"
else
  echo "note: no MNIST under COHORT_DATA_DIR; using the synthetic set" >&2
  data='data { kind: SYNTHETIC synthetic { shape: [1, 28, 28] train_samples: 4096 test_samples: 1000 noise: 3 } }'
  what="the synthetic set (1,000 test samples)"
fi
cat > "$tmp/job.textproto" <<SPEC
name: "evaluate"
model { zoo: "mlp_mnist" }
$data
batch_size: 64
epochs: 1
optimizer { lr: 0.05 momentum: 0.9 }
SPEC
"$cohort" train --job="$tmp/job.textproto" --checkpoint-dir="$tmp/ck" \
  --devices=cpu:2 --quiet --report="$tmp/report.json" > /dev/null 2> "$tmp/train.err" ||
  fail "train: $(cat "$tmp/train.err")"
ckpt=$(ls "$tmp"/ck/ckpt-*.cohort | tail -1)
out=$("$cohort" evaluate --checkpoint="$ckpt" --confusion="$tmp/confusion.csv" 2>&1) ||
  fail "evaluate: $out"
"$cohort" predict --checkpoint="$ckpt" --out="$tmp/predictions.csv" --top-k=3 \
  > /dev/null 2> "$tmp/predict.err" || fail "predict: $(cat "$tmp/predict.err")"
if result=$($py - "$tmp/report.json" "$tmp/confusion.csv" "$tmp/predictions.csv" <<PY
import csv, json, sys
report = json.load(open(sys.argv[1]))["test_metrics"]
line = """$out""".splitlines()[0]
shown = dict(p.strip().split(" ") for p in line.split(": ", 1)[1].split(" | "))
rows = list(csv.reader(open(sys.argv[2])))[1:]
matrix = [[int(v) for v in r[1:]] for r in rows]
total = sum(map(sum, matrix))
diagonal = sum(matrix[i][i] for i in range(len(matrix)))
preds = list(csv.DictReader(open(sys.argv[3])))
top1 = sum(p["class_1"] == p["label"] for p in preds) / len(preds)
ok = (abs(float(shown["accuracy"]) - report["accuracy"]) < 1e-6 and
      abs(float(shown["loss"]) - report["loss"]) < 1e-5 * max(1, report["loss"]) and
      abs(diagonal / total - report["accuracy"]) < 1e-9 and
      abs(top1 - report["accuracy"]) < 1e-9 and total == len(preds))
print("report accuracy %.4f loss %.5f; evaluate accuracy %s loss %s; "
      "confusion %d/%d; predict top-1 %.4f" % (report["accuracy"],
      report["loss"], shown["accuracy"], shown["loss"], diagonal, total, top1))
sys.exit(0 if ok else 1)
PY
); then
  ok "$what: $result"
else
  fail "$what: evaluate and predict disagree with the report: $result"
fi

# --threads sets the compute threads; the predicted classes stay the same.
"$cohort" predict --checkpoint="$ckpt" --out="$tmp/predictions1.csv" --top-k=3 \
  --threads=1 > /dev/null 2> "$tmp/predict1.err" ||
  fail "predict --threads=1: $(cat "$tmp/predict1.err")"
if cmp -s <(cut -d, -f1-3 "$tmp/predictions.csv") <(cut -d, -f1-3 "$tmp/predictions1.csv"); then
  ok "predict --threads=1 predicts the same classes"
else
  fail "predict --threads=1 predicts other classes than the default threads"
fi

# Bad input: one line, exit 2.
expect_refused_text "predict: no compute threads" "--threads" \
  "$cohort" predict --checkpoint="$ckpt" --out="$tmp/p.csv" --threads=0
expect_refused_text "evaluate: an unknown split" "--split must be test or train, got \"val\"" \
  "$cohort" evaluate --checkpoint="$ckpt" --split=val
expect_refused_text "predict: an unknown output kind" "--out must end in .npy (raw outputs) or .csv (top-k classes)" \
  "$cohort" predict --checkpoint="$ckpt" --out="$tmp/p.txt"
# Text generation needs a TOKENS (BYTES) checkpoint and sane
# sampling flags (cli/generate_test covers the sampling itself).
expect_refused_text "predict --prompt: not a language model's checkpoint" \
  "needs a checkpoint of a TOKENS data set in format BYTES; this one's data set is" \
  "$cohort" predict --checkpoint="$ckpt" --prompt=hello --generate=5
expect_refused_text "predict --prompt: a negative temperature" \
  "--temperature must be a finite number >= 0 (0: greedy), got -1" \
  "$cohort" predict --checkpoint="$ckpt" --prompt=hello --generate=5 --temperature=-1
expect_refused_text "predict --prompt: nothing to generate" "--generate must be at least 1" \
  "$cohort" predict --checkpoint="$ckpt" --prompt=hello
expect_refused_text "predict --generate without a prompt" "--generate needs --prompt" \
  "$cohort" predict --checkpoint="$ckpt" --generate=5
printf 'not a checkpoint' > "$tmp/bad.cohort"
expect_refused "evaluate: not a checkpoint" "bad.cohort" \
  "$cohort" evaluate --checkpoint="$tmp/bad.cohort"

finish
