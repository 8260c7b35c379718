#!/usr/bin/env bash
# deploy/slurm/train.sbatch on a real SLURM. The test makes its
# own one-node cluster -- slurmctld and slurmd from Debian's slurm-wlm, with
# a slurm.conf, state and spool in a temporary folder, free ports, and
# auth/none (or, where the package lacks it, a munged of its own) -- and
# removes it at exit. Skipped with the reason without root or slurm-wlm.
#   1. sbatch -N1 -n3 of a small synthetic job: task 0 serves the
#      coordinator and trains, tasks 1-2 train; the SLURM job COMPLETES and
#      the report says SUCCEEDED with 3 workers.
#   2. A long job, scancel'ed while it trains (SIGTERM, SIGKILL after
#      KillWait = 10 s): every task stops after its step in flight, cohort
#      rank 0's final checkpoint verifies, and the report says STOPPED.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$(realpath "$1")"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sbatch_file="$root/deploy/slurm/train.sbatch"
# Bazel's test environment leaves the administrator's folders off PATH.
PATH="$PATH:/usr/sbin:/sbin"

skip() { echo "SKIP: $*"; exit 0; }
[[ $(id -u) -eq 0 ]] || skip "slurmd must run as root to start tasks"
for tool in slurmctld slurmd sbatch scontrol scancel sinfo; do
  command -v "$tool" >/dev/null || skip "no $tool (tools/setup installs slurm-wlm)"
done
plugin_dir=$(dirname "$(ls /usr/lib/*/slurm-wlm/auth_munge.so /usr/lib/slurm*/auth_munge.so \
  /usr/lib64/slurm/auth_munge.so 2>/dev/null | head -1)" 2>/dev/null)
auth=none
if [[ "${COHORT_SLURM_AUTH:-}" == munge || ! -f "$plugin_dir/auth_none.so" ]]; then
  auth=munge
  command -v munged >/dev/null || skip "no auth/none plugin and no munged (tools/setup installs munge)"
fi

# Short paths: slurmd and munged make Unix sockets in their folders, whose
# paths must fit 108 bytes (Bazel's TEST_TMPDIR does not).
sl=$(mktemp -d /tmp/cohort-slurm.XXXXXX)
mkdir -p "$sl/state" "$sl/spool" "$sl/log"
chmod 755 "$tmp" "$sl"
node=$(hostname)
export SLURM_CONF="$sl/slurm.conf"
slurm_pids=()
cleanup() {
  # Jobs first, so that their slurmstepd processes end with them.
  scancel --full --signal=KILL --partition=cohort >/dev/null 2>&1
  for _ in $(seq 50); do
    [[ -z "$(squeue -h 2>/dev/null)" ]] && break
    sleep 0.2
  done
  local p
  for p in "${slurm_pids[@]}"; do kill "$p" 2>/dev/null; done
  sleep 1
  for p in "${slurm_pids[@]}" "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$sl"
  [[ -z "${TEST_TMPDIR:-}" ]] && rm -rf "$tmp"
}
trap cleanup EXIT

if [[ $auth == munge ]]; then
  mkdir -p "$sl/munge"
  dd if=/dev/urandom of="$sl/munge/key" bs=1024 count=1 status=none
  chmod 400 "$sl/munge/key"
  munged --foreground --force --key-file="$sl/munge/key" --socket="$sl/munge/socket" \
    --pid-file="$sl/munge/pid" --log-file="$sl/munge/log" --seed-file="$sl/munge/seed" \
    > "$sl/munge/out" 2>&1 &
  slurm_pids+=($!)
  wait_for 10 test -S "$sl/munge/socket" || skip "munged does not start: $(cat "$sl/munge/log" 2>&1)"
  auth_lines="AuthType=auth/munge
AuthInfo=socket=$sl/munge/socket
CredType=cred/munge"
else
  auth_lines="AuthType=auth/none
CredType=cred/none"
fi

cat > "$SLURM_CONF" <<CONF
ClusterName=cohorttest
SlurmctldHost=$node
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
$auth_lines
StateSaveLocation=$sl/state
SlurmdSpoolDir=$sl/spool
SlurmctldPidFile=$sl/slurmctld.pid
SlurmdPidFile=$sl/slurmd.pid
SlurmctldLogFile=$sl/log/slurmctld.log
SlurmdLogFile=$sl/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
KillWait=10
MinJobAge=600
# Three tasks on one node of perhaps 2 CPUs: the node claims 4 (at least),
# and config_overrides keeps slurmd from draining it for the difference.
SlurmdParameters=config_overrides
NodeName=$node CPUs=$(( $(nproc) > 4 ? $(nproc) : 4 )) State=UNKNOWN
PartitionName=cohort Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF

slurmctld -D -i > "$sl/log/slurmctld.out" 2>&1 &
slurm_pids+=($!)
slurmd -D > "$sl/log/slurmd.out" 2>&1 &
slurm_pids+=($!)
idle() { [[ "$(sinfo -h -n "$node" -o %T 2>/dev/null)" == idle ]]; }
wait_for 30 idle || skip "slurmctld/slurmd did not come up idle (auth/$auth): $(tail -3 "$sl/log/slurmctld.out" "$sl/log/slurmd.out")"
echo "slurm: one node $node, auth/$auth, KillWait 10 s"

spec() {  # spec NAME EPOCHS
  cat > "$tmp/$1.textproto" <<SPEC
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 3072 test_samples: 256 } }
batch_size: 32
epochs: $2
optimizer { lr: 0.05 momentum: 0.9 }
checkpoint { dir: "$tmp/$1.ckpt" every_steps: 1000000 }
SPEC
}
job_field() { scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
job_over() { [[ "$(job_field "$1" JobState)" =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)$ ]]; }
submit() {  # submit NAME PORT [cohort flags]: echoes the SLURM job id
  local name=$1 port=$2
  shift 2
  (cd "$tmp" && COHORT="$cohort" COHORT_RUN_DIR="$tmp/$name.run" COHORT_COORDINATOR_PORT=$port \
    sbatch --parsable -N1 -n3 --ntasks-per-node=3 -o "$tmp/$name.out" \
    "$sbatch_file" "$tmp/$name.textproto" "$@")
}

# 1. A job that succeeds.
spec ok 2
id=$(submit ok "$(free_port)" --quiet)
if [[ -z "$id" ]]; then
  fail "sbatch refused the job: $(tail -3 "$sl/log/slurmctld.log")"
elif wait_for 120 job_over "$id"; then
  state=$(job_field "$id" JobState)
  report="$tmp/ok.run/report.json"
  if [[ $state == COMPLETED && "$(job_field "$id" ExitCode)" == 0:0 ]] &&
     grep -q '"state": "SUCCEEDED"' "$report" && grep -q '"world_size": 3' "$report" &&
     grep -q "cohort launch: job SUCCEEDED" "$tmp/ok.out"; then
    ok "sbatch -N1 -n3 train.sbatch: SLURM job $id COMPLETED, report SUCCEEDED with 3 workers: $(grep -m1 'task 0 of 3' "$tmp/ok.out")"
  else
    fail "SLURM job $id: $state, exit $(job_field "$id" ExitCode): $(tail -5 "$tmp/ok.out")"
  fi
else
  fail "SLURM job $id still $(job_field "$id" JobState) ($(job_field "$id" Reason)) after 120 s: $(tail -5 "$tmp/ok.out" "$sl/log/slurmd.log" 2>&1)"
fi

# 2. scancel while it trains.
spec long 100000
port=$(free_port)
id=$(submit long "$port" --quiet --min-step-ms=5)
stepping() {
  "$cohort" status --coordinator="127.0.0.1:$port" --token-file="$tmp/long.run/token" --json \
    2>/dev/null | grep -q '"step": "[1-9]'
}
if [[ -n "$id" ]] && wait_for 90 stepping; then
  sleep 1
  start=$SECONDS
  scancel "$id"
  wait_for 40 job_over "$id"
  took=$((SECONDS - start))
  final=$(grep -o "stopped by a termination signal after step [0-9]*; final checkpoint in [^ ]*" \
    "$tmp/long.out" | head -1)
  step=$(sed -n 's/.*after step \([0-9]*\);.*/\1/p' <<< "$final")
  newest=$(ls "$tmp/long.ckpt" 2>/dev/null | grep '^ckpt-.*\.cohort$' | sort | tail -1)
  if [[ -n "$step" && "$newest" == "$(printf 'ckpt-%012d.cohort' "$step")" ]] &&
     "$cohort" checkpoint verify "$tmp/long.ckpt" > "$tmp/verify.out" 2>&1; then
    ok "scancel: SLURM job $id $(job_field "$id" JobState) after ${took} s; $final ($newest verifies)"
  else
    fail "scancel: $(job_field "$id" JobState), newest '$newest': $(tail -8 "$tmp/long.out") $(cat "$tmp/verify.out" 2>/dev/null)"
  fi
  if grep -q '"state": "STOPPED"' "$tmp/long.run/report.json" 2>/dev/null &&
     grep -q '"reason": "stopped by a termination signal"' "$tmp/long.run/report.json"; then
    ok "scancel: task 0 ended the job as STOPPED and wrote the report"
  else
    fail "scancel: no STOPPED report: $(grep -E '"(state|reason)"' "$tmp/long.run/report.json" 2>&1)"
  fi
else
  fail "the long SLURM job ${id:-(not submitted)} never trained: $(tail -5 "$tmp/long.out" 2>/dev/null)"
fi

finish
