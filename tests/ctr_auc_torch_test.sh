#!/usr/bin/env bash
# A recommendation model end to end, against PyTorch 1.13: click logs made
# by tools/make-ctr-data (200,000 training rows in two gzip files, 20,000
# test rows, seed 3), the zoo's dlrm_small with tables of 4096 rows (so that
# the dense table gradients all-reduce quickly) trained one pass with
# Adagrad by two cohort workers and by PyTorch (bench/ctr_torch.py,
# nn.EmbeddingBag(sparse=True)), evaluated by exact AUC. Both must land
# within 0.01 of each other and below the data's Bayes AUC; the report and
# `cohort evaluate` must agree. Bad categorical input is one line naming
# file, line and column, exit 2. Skips without NumPy or PyTorch.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py=/usr/bin/python3

if ! $py -c 'import numpy, torch' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 lacks numpy or torch (python3-torch)"
  exit 0
fi

data="$tmp/ctr"
$py "$root/tools/make-ctr-data" --out "$data" --train-rows 200000 \
  --test-rows 20000 --files 2 --gzip --seed 3 || fail "make-ctr-data"
bayes=$($py -c "import json; print(json.load(open('$data/meta.json'))['bayes_auc']['test'])")

model=$($py "$root/bench/ctr_torch.py" --cohort-model 4096)
cat > "$tmp/job.textproto" <<SPEC
name: "ctr"
$model
data {
  kind: CRITEO
  dir: "$data"
  criteo {
    train: ["train-00000.txt.gz", "train-00001.txt.gz"]
    test: "test.txt.gz"
    table_rows: 4096
  }
}
batch_size: 64
epochs: 1
optimizer { kind: ADAGRAD lr: 0.05 }
loss: BCE_WITH_LOGITS
eval { metric: "auc" }
seed: 1
SPEC

# Two workers of batch 64: a global batch of 128, as PyTorch's below.
"$cohort" local --workers=2 --threads=1 --job="$tmp/job.textproto" \
  --checkpoint-dir="$tmp/ck" --report="$tmp/report.json" --quiet \
  > "$tmp/cohort.out" 2>&1 || fail "cohort local: $(tail -3 "$tmp/cohort.out")"
ours=$($py -c "import json; print(json.load(open('$tmp/report.json'))['test_metrics']['auc'])" 2>/dev/null)

theirs_line=$($py "$root/bench/ctr_torch.py" --train "$data"/train-0000{0,1}.txt.gz \
  --test "$data/test.txt.gz" --batch 128 --lr 0.05 --rows 4096 --seed 1)
theirs=$(awk '{print $4}' <<< "$theirs_line")
echo "cohort auc $ours; PyTorch: $theirs_line; Bayes auc $bayes"

if [[ -z "$ours" || -z "$theirs" ]]; then
  fail "no AUC (cohort: '$ours', PyTorch: '$theirs')"
elif $py -c "import sys; o, t, b = $ours, $theirs, $bayes; sys.exit(0 if abs(o - t) <= 0.01 and o < b and o > 0.75 else 1)"; then
  ok "cohort auc $ours within 0.01 of PyTorch's $theirs, below Bayes $bayes"
else
  fail "cohort auc $ours, PyTorch $theirs, Bayes $bayes: want within 0.01, below Bayes, above 0.75"
fi

# The same model with sparse tables on two SYNC parameter-server shards
# (workers pull only the rows a batch touches): the same AUC within 0.01.
sed -e 's/\(embedding_bag {[^}]*dim: [0-9]*\) }/\1 sparse: true }/' \
  "$tmp/job.textproto" > "$tmp/sparse.textproto"
printf 'mode: PS\nps { shards: 2 }\n' >> "$tmp/sparse.textproto"
grep -q "sparse: true" "$tmp/sparse.textproto" || fail "no sparse tables in the spec"
"$cohort" local --workers=2 --threads=1 --job="$tmp/sparse.textproto" \
  --report="$tmp/sparse.json" --quiet > "$tmp/sparse.out" 2>&1 ||
  fail "cohort local, sparse PS: $(tail -3 "$tmp/sparse.out")"
sparse=$($py -c "import json; print(json.load(open('$tmp/sparse.json'))['test_metrics']['auc'])" 2>/dev/null)
if $py -c "import sys; sys.exit(0 if abs(float('${sparse:-nan}') - $theirs) <= 0.01 else 1)"; then
  ok "sparse PS auc $sparse within 0.01 of PyTorch's $theirs"
else
  fail "sparse PS auc '$sparse', PyTorch $theirs: want within 0.01"
fi

# cohort evaluate on the final checkpoint gives the report's AUC.
# (Other batches than the workers' evaluation: a logit may move by an ulp
# and swap a near tie, so not to the last bit.)
evaluated=$("$cohort" evaluate --checkpoint="$tmp/ck" 2>&1 |
  sed -n 's/.* auc \([0-9.e-]*\).*/\1/p')
if $py -c "import sys; sys.exit(0 if abs(float('$evaluated' or 'nan') - float('$ours' or 'nan')) < 1e-4 else 1)"; then
  ok "cohort evaluate: auc $evaluated"
else
  fail "cohort evaluate gave auc '$evaluated', training reported $ours"
fi

# Bad categorical input: one line naming file, line and column.
printf '1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13' > "$tmp/bad.txt"
for i in $(seq 26); do printf '\t0a0b0c0d' >> "$tmp/bad.txt"; done
printf '\n0\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13' >> "$tmp/bad.txt"
for i in $(seq 26); do
  if [[ $i == 5 ]]; then printf '\tnothex' >> "$tmp/bad.txt"; else printf '\t0a0b0c0d' >> "$tmp/bad.txt"; fi
done
printf '\n' >> "$tmp/bad.txt"
sed -e "s|train: \[.*\]|train: \"$tmp/bad.txt\"|" -e "s|test: \"test.txt.gz\"|test: \"$tmp/bad.txt\"|" \
  "$tmp/job.textproto" > "$tmp/bad.textproto"
expect_refused "a hex cell that is not hex" "bad.txt:2:.*19" \
  "$cohort" train --job="$tmp/bad.textproto" --quiet
# A line with 25 categorical columns, and an id past its table.
head -1 "$tmp/bad.txt" | cut -f 1-39 > "$tmp/short.txt"
sed -e "s|$tmp/bad.txt|$tmp/short.txt|g" "$tmp/bad.textproto" > "$tmp/short.textproto"
expect_refused "a line with 25 categorical columns" "short.txt:1: 39 columns, expected 40" \
  "$cohort" train --job="$tmp/short.textproto" --quiet
printf '1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13' > "$tmp/past.txt"
for i in $(seq 26); do
  if [[ $i == 3 ]]; then printf '\t5000' >> "$tmp/past.txt"; else printf '\t10' >> "$tmp/past.txt"; fi
done
printf '\n' >> "$tmp/past.txt"
sed -e "s|$tmp/bad.txt|$tmp/past.txt|g" -e "s|table_rows: 4096|table_rows: 4096 ids_as_given: true|" \
  "$tmp/bad.textproto" > "$tmp/past.textproto"
expect_refused "an id past its table" "past.txt:1:.*column 17.*4096" \
  "$cohort" train --job="$tmp/past.textproto" --quiet
finish
