#!/usr/bin/env bash
# A checkpoint that cannot be written in a multi-worker
# job is the job's failure (FAILED, the reason naming the path and errno,
# exit 1), never a peer failure: it used to send rank 0 into 91 rejoins
# and end SUCCEEDED with most checkpoints missing. The full disk is a
# 1.2 MB tmpfs in a mount namespace made here; the test skips, saying so,
# where it may not make one.
#
# usage: checkpoint_full_test.sh COHORT
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cohort=$(readlink -f "$1")

if ! unshare -m true 2>/dev/null; then
  echo "SKIP: no mount namespaces here (needs root); nothing checked"
  finish
  exit $?
fi
mkdir -p "$tmp/full"
cat > "$tmp/job.textproto" <<SPEC
name: "checkpoint-full"
model { zoo: "lenet5" }
data { kind: SYNTHETIC synthetic { train_samples: 8192 test_samples: 256 } }
batch_size: 32
epochs: 2
optimizer { kind: SGD lr: 0.05 momentum: 0.9 }
checkpoint { dir: "$tmp/full" every_steps: 20 keep: 3 }
cluster { min_workers: 2 max_workers: 2 max_restarts: 3 }
SPEC
start=$SECONDS
unshare -m bash -c '
  mount -t tmpfs -o size=1200k none "$1" || exit 90
  timeout 180 "$2" local --job="$3" --workers=2 > "$4" 2>&1' \
  _ "$tmp/full" "$cohort" "$tmp/job.textproto" "$tmp/local.log"
rc=$?
took=$((SECONDS - start))
if [[ $rc == 90 ]]; then
  echo "SKIP: cannot mount a tmpfs here; nothing checked"
  finish
  exit $?
fi
echo "cohort local exited $rc after ${took}s"
[[ $rc == 1 ]] && ok "the job fails (exit 1)" || fail "exit $rc (want 1); $(tail -3 "$tmp/local.log")"
grep -q 'job FAILED.*cannot be written.*No space left on device' "$tmp/local.log" \
  && ok "the reason names the checkpoint path and the errno" \
  || fail "no FAILED reason naming the disk: $(tail -3 "$tmp/local.log")"
rejoins=$(grep -c 'rejoining' "$tmp/local.log")
[[ $rejoins == 0 ]] && ok "no worker rejoined" || fail "$rejoins rejoins"
finish
