#!/usr/bin/env bash
# Issue 16, defect 7: every output path is checked before the work (exit 2,
# nothing trained), and a report that cannot be written at the end is a
# non-zero exit everywhere.
#
# usage: output_paths_test.sh COHORT
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cohort=$(readlink -f "$1")

cat > "$tmp/job.textproto" <<'SPEC'
name: "paths-test"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: [100] train_samples: 4096 test_samples: 256 } }
batch_size: 32
epochs: 2
optimizer { kind: SGD lr: 0.05 }
checkpoint { every_steps: 50 }
cluster { min_workers: 1 max_workers: 1 }
SPEC
bad="$tmp/no/such/dir/report.json"
touch "$tmp/a_file"

# expect_refused NAME COMMAND...: exit 2 naming the flag, nothing trained.
expect_refused() {
  local name=$1 want=$2
  shift 2
  local start=$SECONDS out rc
  out=$(timeout 60 "$@" 2>&1)
  rc=$?
  if [[ $rc == 2 ]] && grep -q -- "$want" <<< "$out" &&
     ! grep -q '^result:' <<< "$out" && (( SECONDS - start < 20 )); then
    ok "$name: exit 2 before training ($want)"
  else
    fail "$name (exit $rc, $((SECONDS - start)) s): $out"
  fi
}

expect_refused "train --report" "--report: cannot write" \
  "$cohort" train --job="$tmp/job.textproto" --report="$bad" --quiet
expect_refused "train checkpoint dir" "checkpoint directory" \
  "$cohort" train --job="$tmp/job.textproto" --checkpoint-dir="$tmp/a_file/ckpt" --quiet
expect_refused "coordinator --report" "--report: cannot write" \
  "$cohort" coordinator --job="$tmp/job.textproto" --report="$bad" --listen=127.0.0.1:0
expect_refused "local --report" "--report: cannot write" \
  "$cohort" local --job="$tmp/job.textproto" --report="$bad" --workers=1

# The report's directory disappears while the job runs: the coordinator's
# exit says so instead of 0.
mkdir -p "$tmp/gone"
port=$(free_port)
"$cohort" coordinator --job="$tmp/job.textproto" --listen="127.0.0.1:$port" \
  --report="$tmp/gone/report.json" > "$tmp/coordinator.log" 2>&1 &
coord=$!
pids+=("$coord")
wait_for 20 "$cohort" status --coordinator="127.0.0.1:$port" || fail "no coordinator"
rm -rf "$tmp/gone"
"$cohort" worker --coordinator="127.0.0.1:$port" --devices=cpu:1 --quiet \
  > "$tmp/worker.log" 2>&1
wait "$coord"
rc=$?
if [[ $rc != 0 ]] && grep -q "report" "$tmp/coordinator.log"; then
  ok "a report lost at the end is a non-zero exit ($rc)"
else
  fail "coordinator exit $rc with its report lost: $(tail -3 "$tmp/coordinator.log")"
fi
finish
