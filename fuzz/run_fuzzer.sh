#!/usr/bin/env bash
# Runs one libFuzzer target briefly over its seed corpus; the sh_test behind
# every //fuzz:*_fuzz_test (bazel test --config=fuzz //fuzz:fuzz_tests).
#   run_fuzzer.sh FUZZER MAKE_SEEDS SEED_KIND DICT [SEED_FILE...]
# SEED_KIND is make_seeds' TARGET argument, or "-" for text seeds only; DICT
# a libFuzzer dictionary or "-". The
# corpus is built in the test's temp dir, so the checkout is never written.
# FUZZ_SECONDS (default 15) changes how long it runs.
set -euo pipefail

fuzzer=$1
make_seeds=$2
seed_kind=$3
dict=$4
shift 4
name=$(basename "$fuzzer")

work="${TEST_TMPDIR:-$(mktemp -d)}"
corpus="$work/corpus"
mkdir -p "$corpus"
if [[ $# -gt 0 ]]; then
  cp "$@" "$corpus/"
fi
if [[ "$seed_kind" != - ]]; then
  "$make_seeds" "$seed_kind" "$corpus"
fi
# Crash inputs go where Bazel keeps them (test.outputs/), or next to the
# corpus when run by hand.
artifacts="${TEST_UNDECLARED_OUTPUTS_DIR:-$work}"
mkdir -p "$artifacts"

flags=()
if [[ "$dict" != - ]]; then
  flags+=(-dict="$dict")
fi

export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
status=0
"$fuzzer" "${flags[@]}" -max_total_time="${FUZZ_SECONDS:-15}" \
  -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$corpus" || status=$?
if [[ $status -ne 0 ]]; then
  echo "run_fuzzer: $name failed (exit $status)" >&2
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
  exit "$status"
fi
echo "run_fuzzer: $name: no findings in ${FUZZ_SECONDS:-15} s"
