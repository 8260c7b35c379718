#!/usr/bin/env bash
# `cohort launch` in a torchrun-style environment (what torchrun
# and Kubeflow's PyTorchJob set), with no cohort flags but --job:
#   1. two ranks (MASTER_ADDR=127.0.0.1, a free MASTER_PORT, RANK 0 and 1,
#      WORLD_SIZE=2): rank 0 runs the coordinator and a worker, rank 1 a
#      worker; the job succeeds, both exit 0;
#   2. SIGTERM to both ranks mid-training (what a PyTorchJob's deletion
#      does): both stop after the step in flight, cohort rank 0 writes a
#      final checkpoint that verifies, and rank 0 ends the job as STOPPED
#      with its report;
#   3. malformed variables are one line naming the variable and its value
#      (exit 2); `cohort worker` without --coordinator uses the environment.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"

spec() {  # spec NAME EPOCHS: a small synthetic job with a checkpoint dir
  cat > "$tmp/$1.textproto" <<SPEC
name: "$1"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 2048 test_samples: 256 } }
batch_size: 32
epochs: $2
optimizer { lr: 0.05 momentum: 0.9 }
checkpoint { dir: "$tmp/$1.ckpt" every_steps: 1000000 }
SPEC
}

# rank N NAME [flags...]: starts launch rank N of 2 in the background; sets r
rank() {
  local n=$1 name=$2
  shift 2
  env MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" RANK="$n" WORLD_SIZE=2 \
    "$cohort" launch --job="$tmp/$name.textproto" "$@" 2> "$tmp/$name.r$n.err" &
  r=$!; pids+=($r)
}

# 1. A job that succeeds.
spec ok 2
port=$(free_port)
rank 0 ok --report="$tmp/ok.json"; r0=$r
rank 1 ok; r1=$r
wait $r0; rc0=$?
wait $r1; rc1=$?
if [[ $rc0 -eq 0 && $rc1 -eq 0 ]] && grep -q "cohort launch: job SUCCEEDED" "$tmp/ok.r0.err" &&
   grep -q '"world_size": 2' "$tmp/ok.json" && grep -q '"state": "SUCCEEDED"' "$tmp/ok.json"; then
  ok "2 ranks from MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE: job SUCCEEDED, world_size 2: $(grep -h 'cohort launch: torchrun' "$tmp/ok.r0.err")"
else
  fail "2 ranks: exits $rc0/$rc1: $(tail -3 "$tmp/ok.r0.err" "$tmp/ok.r1.err" 2>/dev/null)"
fi

# 2. SIGTERM to both ranks while they train.
spec long 100000
port=$(free_port)
rank 0 long --report="$tmp/long.json" --min-step-ms=5 --quiet; r0=$r
rank 1 long --min-step-ms=5 --quiet; r1=$r
stepping() { "$cohort" status --coordinator="127.0.0.1:$port" --json 2>/dev/null | grep -q '"step": "[1-9]'; }
if wait_for 60 stepping; then
  sleep 1
  start=$SECONDS
  kill -TERM $r0 $r1
  wait $r0; rc0=$?
  wait $r1; rc1=$?
  took=$((SECONDS - start))
  final=$(grep -ho "stopped by a termination signal after step [0-9]*; final checkpoint in [^ ]*" \
    "$tmp/long.r0.err" "$tmp/long.r1.err" | head -1)
  step=$(sed -n 's/.*after step \([0-9]*\);.*/\1/p' <<< "$final")
  newest=$(ls "$tmp/long.ckpt" 2>/dev/null | grep '^ckpt-.*\.cohort$' | sort | tail -1)
  if [[ -n "$final" && "$newest" == "$(printf 'ckpt-%012d.cohort' "$step")" ]] &&
     "$cohort" checkpoint verify "$tmp/long.ckpt" > "$tmp/verify.out" 2>&1; then
    ok "SIGTERM to both ranks: $final ($newest verifies; both gone after ${took} s)"
  else
    fail "SIGTERM: exits $rc0/$rc1, newest '$newest': $(tail -3 "$tmp/long.r0.err" "$tmp/long.r1.err" "$tmp/verify.out" 2>/dev/null)"
  fi
  if grep -q '"state": "STOPPED"' "$tmp/long.json" &&
     grep -q '"reason": "stopped by a termination signal"' "$tmp/long.json" &&
     grep -q "cohort launch: job STOPPED: stopped by a termination signal" "$tmp/long.r0.err"; then
    ok "rank 0 ended the job as STOPPED (\"stopped by a termination signal\") and wrote its report"
  else
    fail "the report after SIGTERM: $(grep -E '"(state|reason)"' "$tmp/long.json" 2>&1) $(tail -2 "$tmp/long.r0.err")"
  fi
else
  fail "the long job never trained: $(tail -3 "$tmp/long.r0.err" "$tmp/long.r1.err")"
fi

# 3. Malformed environments and the `cohort worker` hook.
good=(MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 RANK=1 WORLD_SIZE=2)
launch=("$cohort" launch --job="$tmp/ok.textproto")
expect_refused_text "RANK out of range" 'RANK="2": want a whole number in [0, 1]' \
  env "${good[@]}" RANK=2 "${launch[@]}"
expect_refused_text "MASTER_PORT not a number" 'MASTER_PORT="29500x"' \
  env "${good[@]}" MASTER_PORT=29500x "${launch[@]}"
expect_refused_text "MASTER_ADDR with a port" 'MASTER_ADDR="h:1": want a host name or an IP address (no port)' \
  env "${good[@]}" MASTER_ADDR=h:1 "${launch[@]}"
expect_refused_text "WORLD_SIZE missing" "WORLD_SIZE is not set" \
  env -u WORLD_SIZE MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 RANK=0 "${launch[@]}"
expect_refused_text "a bad SLURM node list" 'SLURM_JOB_NODELIST="node[01-": a "[" without its "]"' \
  env SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_STEP_ID=0 SLURM_JOB_NODELIST="node[01-" "${launch[@]}"
expect_refused_text "a SLURM batch script" "start cohort launch with srun" \
  env SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_JOB_NODELIST=vm "${launch[@]}"
expect_refused_text "no environment" "cohort launch needs a SLURM job step" \
  env -u MASTER_ADDR -u RANK -u WORLD_SIZE -u SLURM_PROCID "${launch[@]}"
expect_refused_text "--coordinator given to launch" "takes the coordinator's address from the launch environment" \
  env "${good[@]}" "${launch[@]}" --coordinator=127.0.0.1:1
# `cohort worker` with no --coordinator dials the environment's coordinator
# (nobody listens there: it says which it tried).
port=$(free_port)
out=$(env MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" RANK=1 WORLD_SIZE=2 \
  timeout 20 "$cohort" worker --connect-timeout=1 2>&1)
if grep -q "cohort worker: no --coordinator; torchrun-style environment" <<< "$out" &&
   grep -q "127.0.0.1:$port" <<< "$out"; then
  ok "cohort worker without --coordinator: $(head -1 <<< "$out")"
else
  fail "cohort worker without --coordinator: $out"
fi

finish
