#!/usr/bin/env bash
# The short chaos run (tests/chaos/chaos.py, about 120 s): a coordinator and
# 3 LeNet-5 workers, a worker killed with SIGKILL every 20-40 s and replaced
# at once; the job must succeed with bounded detection and recovery times,
# verified checkpoints and the accuracy of an undisturbed run.
# Uses MNIST under $COHORT_DATA_DIR (tools/test sets it) when present, the
# synthetic data set otherwise. The kill schedule is seed 1 unless
# CHAOS_SEED=N names another (tools/chaos draws one from the clock).
# Logs and checkpoints go to Bazel's undeclared outputs (outputs.zip).
set -u
cohort="$1"
chaos="$2"
out="${TEST_UNDECLARED_OUTPUTS_DIR:-${TEST_TMPDIR:-$(mktemp -d)}}/chaos"
exec /usr/bin/python3 "$chaos" --cohort="$cohort" --duration=120 \
  --data-dir="${COHORT_DATA_DIR:-}" --workdir="$out" --seed="${CHAOS_SEED:-1}"
