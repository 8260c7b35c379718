# shellcheck shell=bash disable=SC2154
# A cohort cluster started by hand on this machine, for the benchmarks of
# parameter-server jobs (sourced, never run): a coordinator, `cohort ps`
# shards and `cohort worker`s over loopback, each shard and worker under
# /usr/bin/time so that its peak RSS is known, and the coordinator kept
# serving after the job (--serve-after-done) so that the workers' final
# progress (steps, bytes moved) and the shards' final statistics (rows
# held) can be read from `cohort status --json` once the job is over.
#
# The sourcing script sets `cohort` (the binary) and `tmp` (a directory),
# and calls cluster_cleanup from its EXIT trap. (Hence SC2154 above:
# `cohort` and `tmp` come from the sourcing script.)
#
#   cluster_start NAME SPEC WORKERS SHARDS THREADS [WORKER-WRAPPER...]
#       starts everything; files go to $tmp/NAME.*; sets `addr`. Worker i's
#       peak RSS (KB) goes to $tmp/NAME.w$i.rss, shard i's to
#       $tmp/NAME.ps$i.rss, their stderr to .err beside them. A wrapper
#       (e.g. `prlimit --as=N`) goes between /usr/bin/time and the worker.
#   cluster_wait NAME: waits for the workers (status 1 if one failed),
#       saves the final status to $tmp/NAME.status.json, stops the
#       coordinator and waits for everything.
#   cluster_status PYTHON-EXPRESSION: evaluates it over the live status
#       (`s`, proto3 JSON: int64 fields are strings) and prints it.
#   cluster_summary NAME: one line "SAMPLES_PER_S AUC STATE STEPS
#       BYTES_PER_STEP_PER_WORKER WORKER_RSS_MB,... SHARD_ROWS,...
#       SHARD_RSS_MB,..." from the coordinator's report and the saved
#       status; '?' where a value is missing.

cluster_pids=()
cluster_cleanup() {
  local p
  for p in "${cluster_pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  return 0
}

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_for SECONDS COMMAND...: polls until COMMAND succeeds.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [[ $SECONDS -ge $deadline ]] && return 1
    sleep 0.2
  done
}

cluster_status() {
  "$cohort" status --coordinator="$addr" --json --timeout=5 2>/dev/null |
    /usr/bin/python3 -c "import json,sys; s=json.load(sys.stdin); print($1)" 2>/dev/null
}

cluster_start() {
  local name=$1 spec=$2 workers=$3 shards=$4 threads=$5 i
  shift 5
  addr="127.0.0.1:$(free_port)"
  "$cohort" coordinator --job="$spec" --listen="$addr" --workers="$workers" \
    --report="$tmp/$name.json" --serve-after-done 2>"$tmp/$name.coord.err" &
  cluster_coord=$!
  cluster_pids+=("$cluster_coord")
  # Clients started before it listens would back off for seconds.
  wait_for 20 cluster_status 's["state"]'
  cluster_shards=()
  for ((i = 0; i < shards; i++)); do
    /usr/bin/time -f %M -o "$tmp/$name.ps$i.rss" "$cohort" ps \
      --coordinator="$addr" --listen=127.0.0.1:0 2>"$tmp/$name.ps$i.err" &
    cluster_shards+=("$!")
    cluster_pids+=("$!")
  done
  cluster_workers=()
  for ((i = 0; i < workers; i++)); do
    /usr/bin/time -f %M -o "$tmp/$name.w$i.rss" "$@" "$cohort" worker \
      --coordinator="$addr" --threads="$threads" 2>"$tmp/$name.w$i.err" &
    cluster_workers+=("$!")
    cluster_pids+=("$!")
  done
}

cluster_wait() {
  local name=$1 p rc=0
  for p in "${cluster_workers[@]}"; do wait "$p" || rc=1; done
  # The shards' final heartbeat (the one told that the job ended) carries
  # their statistics after the last push; they exit right after it.
  for p in "${cluster_shards[@]}"; do wait "$p"; done
  "$cohort" status --coordinator="$addr" --json --timeout=10 \
    >"$tmp/$name.status.json" 2>/dev/null || rc=1
  "$cohort" stop --coordinator="$addr" >/dev/null 2>&1
  wait "$cluster_coord"
  return $rc
}

cluster_summary() {
  /usr/bin/python3 - "$tmp" "$1" <<'PY'
import glob, json, os, sys
tmp, name = sys.argv[1], sys.argv[2]
def load(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return {}
def mb(path):
    try:
        return str(int(open(path).read().split()[-1]) // 1024)
    except (OSError, ValueError, IndexError):
        return "?"
def count(pattern):
    return len(glob.glob(os.path.join(tmp, pattern)))
r, s = load(f"{tmp}/{name}.json"), load(f"{tmp}/{name}.status.json")
sps = r.get("samples_per_s")
auc = (r.get("test_metrics") or {}).get("auc")
# Each worker's bytes moved over its steps (setup's first pull included):
# pushed + pulled in PS mode, the buffer all-reduced in all-reduce mode.
per_step = []
for w in s.get("workers", []):
    p = w.get("progress", {})
    steps = int(p.get("step", 0))
    if steps > 0:
        per_step.append(int(p.get("bytesAllreduced", 0)) / steps)
bytes_per_step = str(round(sum(per_step) / len(per_step))) if per_step else "?"
rows = [str(sh.get("stats", {}).get("rowsHeld", 0)) for sh in s.get("shards", [])]
workers = [mb(f"{tmp}/{name}.w{i}.rss") for i in range(count(f"{name}.w*.rss"))]
shards = [mb(f"{tmp}/{name}.ps{i}.rss") for i in range(count(f"{name}.ps*.rss"))]
print(" ".join([
    f"{sps:.1f}" if isinstance(sps, (int, float)) else "?",
    f"{auc:.6f}" if isinstance(auc, (int, float)) else "?",
    r.get("state", "?"), str(r.get("steps", "?")), bytes_per_step,
    ",".join(workers) or "-", ",".join(rows) or "-", ",".join(shards) or "-"]))
PY
}
