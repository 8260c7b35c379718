#!/usr/bin/env bash
# End to end on the real data sets, through the cohort binary:
#  - examples/mnist_lenet5.textproto, one epoch at one thread, must reach
#    98.0% test accuracy (the run is deterministic for a given build);
#  - examples/cifar10_lenet.textproto trains 100 steps on the CIFAR-10 subset
#    (and cifar10_mobilenet.textproto 60 steps)
#    and evaluates above chance.
# Skips (exit 0, with a message) when $COHORT_DATA_DIR is not set or lacks
# the files; tools/test sets it to ../shared/data when that exists.
set -euo pipefail
cohort="$1"
examples="$(dirname "$2")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
data="${COHORT_DATA_DIR:-}"

json_number() {  # json_number FILE KEY
  sed -n "s/^  \"$2\": \([-0-9.e]*\),*$/\1/p" "$1"
}

if [[ -z "$data" || ! -d "$data/mnist" ]]; then
  echo "SKIPPED: no MNIST under COHORT_DATA_DIR='$data'"
else
  "$cohort" train --job="$examples/mnist_lenet5.textproto" \
    --data-dir="$data/mnist" --threads=1 --quiet --report="$tmp/mnist.json"
  acc=$(json_number "$tmp/mnist.json" test_accuracy)
  echo "mnist lenet5, 1 epoch: test accuracy $acc"
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.98) }' || {
    echo "FAIL: test accuracy $acc is below 0.98"
    exit 1
  }
fi

cifar="$data/cifar10-subset/cifar-10-batches-bin"
if [[ -z "$data" || ! -d "$cifar" ]]; then
  echo "SKIPPED: no CIFAR-10 under COHORT_DATA_DIR='$data'"
else
  "$cohort" train --job="$examples/cifar10_lenet.textproto" \
    --data-dir="$cifar" --max-steps=100 --quiet --report="$tmp/cifar.json"
  acc=$(json_number "$tmp/cifar.json" test_accuracy)
  echo "cifar10 lenet, 100 steps: test accuracy $acc"
  awk -v a="$acc" 'BEGIN { exit !(a > 0.15) }' || {
    echo "FAIL: test accuracy $acc is not above chance (0.10)"
    exit 1
  }
  # The MobileNet-style example (depthwise convolutions, branches).
  "$cohort" train --job="$examples/cifar10_mobilenet.textproto" \
    --data-dir="$cifar" --max-steps=60 --quiet --report="$tmp/mobilenet.json"
  acc=$(json_number "$tmp/mobilenet.json" test_accuracy)
  echo "cifar10 mobilenet, 60 steps: test accuracy $acc"
  awk -v a="$acc" 'BEGIN { exit !(a > 0.15) }' || {
    echo "FAIL: test accuracy $acc is not above chance (0.10)"
    exit 1
  }
fi
echo "PASS"
