#!/usr/bin/env bash
# The sh_test behind every //fuzz:*_fuzz_test (bazel test --config=fuzz
# //fuzz:fuzz_tests): replays the target's corpus, then fuzzes it for a
# fixed number of runs from a fixed seed.
#   run_fuzzer.sh FUZZER MAKE_SEEDS SEED_KIND DICT RUNS [CORPUS_FILE...]
# SEED_KIND is make_seeds' TARGET argument, or "-" for none; DICT a libFuzzer
# dictionary or "-"; CORPUS_FILEs are fuzz/corpus/TARGET/ (seeds and every
# input that once found a bug) plus any other text seeds.
#
# The verdict must not depend on the machine: a time limit would do more
# work on an idle machine than on a busy one, so the run is counted in
# executions (-runs) and seeded (-seed); libFuzzer's time-based corpus
# reload is off, and so is address randomization where setarch can turn it
# off, since Abseil seeds its hash tables from addresses and the coverage
# libFuzzer steers by would differ from run to run. Then two runs try the
# same inputs; only code that seeds from the clock (protobuf's maps, e.g.
# in the safetensors reader's JSON) still varies a little. FUZZ_RUNS and
# FUZZ_SEED override both for a run by hand (bazel test
# --test_env=FUZZ_RUNS=...). The corpus is built in the test's temp dir,
# so the checkout is never written.
set -euo pipefail

fuzzer=$1
make_seeds=$2
seed_kind=$3
dict=$4
runs=${FUZZ_RUNS:-$5}
seed=${FUZZ_SEED:-1}
shift 5
name=$(basename "$fuzzer")

work="${TEST_TMPDIR:-$(mktemp -d)}"
corpus="$work/corpus"
mkdir -p "$corpus"
# Crash inputs go where Bazel keeps them (test.outputs/), or next to the
# corpus when run by hand.
artifacts="${TEST_UNDECLARED_OUTPUTS_DIR:-$work}"
mkdir -p "$artifacts"

flags=()
if [[ "$dict" != - ]]; then
  flags+=(-dict="$dict")
fi
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
run=("$fuzzer")
if setarch "$(uname -m)" -R true 2>/dev/null; then
  run=(setarch "$(uname -m)" -R "$fuzzer")
fi
# A hang detector, not a speed limit: generous, since a loaded machine may
# run an input several times slower.
flags+=(-rss_limit_mb=2048 -timeout=60 -artifact_prefix="$artifacts/")

# report STATUS: names the failure and prints the input libFuzzer saved,
# then exits.
report() {
  echo "run_fuzzer: $name failed (exit $1) fuzzing with -seed=$seed" \
       "-runs=$runs" >&2
  # The input in the log too: test.outputs/ is zipped away by Bazel.
  for f in "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* \
           "$artifacts"/oom-* "$artifacts"/slow-unit-*; do
    [[ -f "$f" ]] || continue
    echo "run_fuzzer: input $f (base64):" >&2
    base64 -w 76 "$f" | head -c 20000 >&2
    echo >&2
  done
  echo "run_fuzzer: reproduce with: base64 -d > /tmp/input <<< '...';" \
       "tools/fuzz ${name%_fuzzer} -- /tmp/input" >&2
  echo "run_fuzzer: once fixed, keep the input as a regression test:" \
       "cp /tmp/input fuzz/corpus/${name%_fuzzer}/crash-WHAT-IT-BROKE" >&2
  exit "$1"
}

# 1. Every committed input once, one by one, so that a regression names its
# file. (Given files, libFuzzer runs each and stops at the first failure,
# after a "Running: FILE" line.)
status=0
if [[ $# -gt 0 ]]; then
  echo "run_fuzzer: replaying $# corpus file(s)" >&2
  "${run[@]}" "${flags[@]}" "$@" 2>&1 | tee "$work/replay.log" >&2 ||
    status=${PIPESTATUS[0]}
  if [[ $status -ne 0 ]]; then
    input=$(sed -n 's/^Running: //p' "$work/replay.log" | tail -1)
    echo "run_fuzzer: $name failed (exit $status) on $input: a bug that" \
         "input once found is back; reproduce with:" \
         "tools/fuzz ${name%_fuzzer} -- $input" >&2
    exit "$status"
  fi
  cp "$@" "$corpus/"
fi

# 2. Fuzzing from the corpus and make_seeds' seeds: the same inputs are
# tried on every machine, however busy.
if [[ "$seed_kind" != - ]]; then
  "$make_seeds" "$seed_kind" "$corpus"
fi
"${run[@]}" "${flags[@]}" -seed="$seed" -runs="$runs" -reload=0 \
  -print_final_stats=1 "$corpus" || status=$?
if [[ $status -ne 0 ]]; then
  report "$status"
fi
echo "run_fuzzer: $name: no findings in $runs runs from seed $seed"
