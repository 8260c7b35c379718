#!/usr/bin/env bash
# Prometheus /metrics on every daemon and the coordinator's dashboard, with
# real processes over loopback:
#   1. a coordinator and two workers started by hand, each with
#      --metrics-listen (workers slowed by --min-step-ms to keep the job
#      running): every /metrics passes `promtool check metrics` and carries
#      the job's, each worker's and its own numbers;
#   2. a real Prometheus server scraping the coordinator, queried through
#      its HTTP API until up{job="cohort"} is 1 and cohort_ series exist;
#   3. the dashboard in headless Chromium: the rendered DOM shows both
#      workers' rows and a loss curve with points; a screenshot is saved
#      (under $TEST_UNDECLARED_OUTPUTS_DIR when Bazel runs it);
#   4. a busy --metrics-listen port fails the coordinator's start clearly;
#   5. a parameter-server job: the shard's /metrics passes promtool and
#      counts pushes, and the coordinator exports the shard.
# Needs promtool, prometheus and chromium (tools/setup installs them).
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
out_dir="${TEST_UNDECLARED_OUTPUTS_DIR:-$tmp}"
export HOME="$tmp"  # Chromium and fontconfig write their caches there
host=$(/usr/bin/python3 -c 'import socket; print(socket.gethostname())')

for tool in promtool prometheus chromium; do
  if ! command -v "$tool" >/dev/null; then
    fail "$tool is not installed: run tools/setup (packages prometheus and chromium)"
    finish
    exit 1
  fi
done

fetch() {  # fetch URL: the body on stdout; fails on an HTTP error
  /usr/bin/python3 -c '
import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"
}
# value FILE SAMPLE: the value of the sample line that starts with SAMPLE.
value() { awk -v s="$2" 'index($0, s " ") == 1 { print $NF; exit }' "$1"; }
positive() { awk -v v="${1:-0}" 'BEGIN { exit !(v > 0) }'; }

synthetic() {  # synthetic EPOCHS: a small MLP job on synthetic data
  cat <<SPEC
name: "metrics-mlp"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 2048 test_samples: 512 } }
batch_size: 32
epochs: $1
optimizer { lr: 0.05 momentum: 0.9 }
SPEC
}

# 1. Coordinator and two workers, each with /metrics.
synthetic 1000 > "$tmp/job.textproto"
printf 'cluster { min_workers: 2 heartbeat_interval_ms: 500 }\n' >> "$tmp/job.textproto"
addr="127.0.0.1:$(free_port)"
cport=$(free_port); w0port=$(free_port); w1port=$(free_port)
"$cohort" coordinator --job="$tmp/job.textproto" --listen="$addr" \
  --metrics-listen="127.0.0.1:$cport" 2>"$tmp/coord.err" &
coord=$!; pids+=($coord)
# Workers started before the coordinator listens back off for seconds.
wait_for 15 fetch "http://127.0.0.1:$cport/metrics"
for r in 0 1; do
  port_var="w${r}port"
  "$cohort" worker --coordinator="$addr" --quiet --min-step-ms=15 \
    --metrics-listen="127.0.0.1:${!port_var}" 2>"$tmp/w$r.err" &
  pids+=($!)
done

# Running, both workers past a few steps, a few samples of history and an
# evaluated epoch: what the dashboard and the checks below need.
ready() {
  fetch "http://127.0.0.1:$cport/metrics" > "$tmp/coord.prom" || return 1
  fetch "http://127.0.0.1:$cport/api/history" > "$tmp/history.json" || return 1
  [[ "$(value "$tmp/coord.prom" 'cohort_job_state{state="RUNNING"}')" == 1 ]] &&
    /usr/bin/python3 - "$tmp/history.json" <<'PY'
import json, sys
h = json.load(open(sys.argv[1]))
sys.exit(0 if len(h["t"]) >= 3 and h["epochs"] and min(h["step"]) > 0 else 1)
PY
}
if ! wait_for 40 ready; then
  fail "the job never ran long enough: $(tail -3 "$tmp/coord.err" "$tmp/w0.err" "$tmp/w1.err")"
  finish
  exit 1
fi
ok "job RUNNING; history: $(cat "$tmp/history.json" | head -c 300)"

check_promtool() {  # check_promtool NAME FILE
  local lint
  if lint=$(promtool check metrics < "$2" 2>&1); then
    ok "promtool check metrics: $1 ($(grep -vc '^#' "$2") samples)"
  else
    fail "promtool check metrics on $1: $lint"
  fi
}

check_promtool coordinator "$tmp/coord.prom"
for r in 0 1; do
  step=$(value "$tmp/coord.prom" "cohort_worker_step{rank=\"$r\",host=\"$host\"}")
  if positive "$step"; then
    ok "coordinator /metrics: worker $r at step $step, loss $(value "$tmp/coord.prom" "cohort_worker_loss{rank=\"$r\",host=\"$host\"}"), comm_wait $(value "$tmp/coord.prom" "cohort_worker_step_seconds{rank=\"$r\",host=\"$host\",phase=\"comm_wait\"}") s/step"
  else
    fail "coordinator /metrics has no step for worker $r: $(grep cohort_worker_step "$tmp/coord.prom")"
  fi
done
for m in cohort_generation cohort_restarts_total cohort_world_size cohort_job_step \
         cohort_job_samples_per_second cohort_uptime_seconds; do
  v=$(value "$tmp/coord.prom" "$m")
  if [[ -n "$v" ]]; then echo "  $m $v"; else fail "coordinator /metrics lacks $m"; fi
done
[[ "$(value "$tmp/coord.prom" cohort_world_size)" == 2 ]] || fail "cohort_world_size is not 2"

ranks=""
for r in 0 1; do
  port_var="w${r}port"
  if fetch "http://127.0.0.1:${!port_var}/metrics" > "$tmp/w$r.prom"; then
    check_promtool "worker $r" "$tmp/w$r.prom"
    rank=$(value "$tmp/w$r.prom" cohort_worker_rank)
    step=$(value "$tmp/w$r.prom" cohort_worker_step)
    ranks="$ranks$rank"
    if positive "$step" && [[ "$(value "$tmp/w$r.prom" cohort_worker_generation)" == 1 ]]; then
      ok "worker $r /metrics: rank $rank, step $step, $(value "$tmp/w$r.prom" cohort_worker_samples_per_second) samples/s, $(value "$tmp/w$r.prom" cohort_worker_allreduced_bytes_total) bytes all-reduced"
    else
      fail "worker $r /metrics: $(grep -v '^#' "$tmp/w$r.prom")"
    fi
  else
    fail "worker $r serves no /metrics: $(tail -2 "$tmp/w$r.err")"
  fi
done
[[ "$(echo "$ranks" | grep -o . | sort | tr -d '\n')" == 01 ]] ||
  fail "the workers' /metrics give ranks '$ranks', not 0 and 1"

# 2. A real Prometheus server scraping the coordinator.
pport=$(free_port)
cat > "$tmp/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: cohort
    static_configs:
      - targets: ["127.0.0.1:$cport"]
YAML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/prometheus-data" \
  --web.listen-address="127.0.0.1:$pport" 2>"$tmp/prometheus.err" &
prom=$!; pids+=($prom)
query() {  # query PROMQL: the first result's value; fails when there is none
  /usr/bin/python3 - "http://127.0.0.1:$pport/api/v1/query" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url = sys.argv[1] + "?" + urllib.parse.urlencode({"query": sys.argv[2]})
r = json.load(urllib.request.urlopen(url, timeout=5))
if r["status"] != "success" or not r["data"]["result"]:
    sys.exit(1)
print(r["data"]["result"][0]["value"][1])
PY
}
scraped() {
  [[ "$(query 'up{job="cohort"}')" == 1 ]] && positive "$(query 'cohort_job_step{job="cohort"}')"
}
if wait_for 30 scraped; then
  ok "prometheus scraped the coordinator: up=$(query 'up{job="cohort"}'), cohort_job_step=$(query 'cohort_job_step{job="cohort"}'), workers=$(query 'count(cohort_worker_step{job="cohort"})'), job samples/s=$(query 'cohort_job_samples_per_second{job="cohort"}')"
else
  fail "prometheus never scraped the coordinator: $(query 'up' 2>&1) $(tail -3 "$tmp/prometheus.err")"
fi
kill "$prom" 2>/dev/null
wait "$prom" 2>/dev/null

# 3. The dashboard in headless Chromium.
chrome=(chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage
        --hide-scrollbars --user-data-dir="$tmp/chromium" --window-size=1400,1000
        --virtual-time-budget=6000)
timeout 60 "${chrome[@]}" --dump-dom "http://127.0.0.1:$cport/" > "$tmp/dom.html" 2>"$tmp/chromium.err"
timeout 60 "${chrome[@]}" --screenshot="$out_dir/dashboard.png" "http://127.0.0.1:$cport/" \
  >/dev/null 2>>"$tmp/chromium.err"
cp "$tmp/dom.html" "$out_dir/dashboard.html" 2>/dev/null
if shown=$(/usr/bin/python3 - "$tmp/dom.html" <<'PY'
import re, sys
dom = open(sys.argv[1]).read()
def text(id_):
    m = re.search(r'id="%s"[^>]*>([^<]*)<' % id_, dom)
    return m.group(1) if m else None
problems = []
rows = {}
for rank in (0, 1):
    m = re.search(r'<tr id="worker-%d"[^>]*>(.*?)</tr>' % rank, dom)
    if not m:
        problems.append("no row for worker %d" % rank)
        continue
    rows[rank] = re.findall(r"<td[^>]*>([^<]*)</td>", m.group(1))
loss = re.search(r'<svg id="loss-chart".*?<path class="line" d="([^"]*)"', dom, re.S)
points = len(re.findall(r"[ML][0-9.]+,[0-9.]+", loss.group(1))) if loss else 0
if points < 2:
    problems.append("the loss chart has %d points" % points)
acc = re.search(r'<svg id="accuracy-chart".*?</svg>', dom, re.S)
dots = len(re.findall(r"<circle", acc.group(0))) if acc else 0
if dots < 1:
    problems.append("the accuracy chart has no point")
if text("state") is None or "RUNNING" not in text("state"):
    problems.append("state shown: %r" % text("state"))
print("state %s, generation %s, restarts %s, step %s, samples/s %s, mean loss %s, "
      "test accuracy %s; loss curve %d points, accuracy %d points" % (
          text("state"), text("generation"), text("restarts"), text("step"),
          text("samples-per-s"), text("loss"), text("accuracy"), points, dots))
for rank, cells in sorted(rows.items()):
    print("  row: " + " | ".join(cells))
if problems:
    print("; ".join(problems))
    sys.exit(1)
PY
); then
  ok "dashboard in Chromium: $shown"
else
  fail "dashboard in Chromium: $shown $(grep -v dbus "$tmp/chromium.err" | tail -3)"
fi
if [[ -s "$out_dir/dashboard.png" ]]; then
  ok "dashboard screenshot: $out_dir/dashboard.png ($(stat -c %s "$out_dir/dashboard.png") bytes)"
else
  fail "no dashboard screenshot: $(grep -v dbus "$tmp/chromium.err" | tail -3)"
fi

# 4. A busy metrics port is refused before anything serves.
if out=$("$cohort" coordinator --job="$tmp/job.textproto" --listen=127.0.0.1:0 \
           --metrics-listen="127.0.0.1:$cport" 2>&1); then
  fail "a second coordinator on a busy --metrics-listen port started"
elif [[ "$out" == *"cannot listen on 127.0.0.1:$cport (--metrics-listen): address already in use"* ]]; then
  ok "busy --metrics-listen: $(echo "$out" | tail -1)"
else
  fail "busy --metrics-listen: $out"
fi

"$cohort" stop --coordinator="$addr" >/dev/null
for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
pids=()

# 5. A parameter-server job: the shard's /metrics.
synthetic 1000 > "$tmp/ps.textproto"
printf 'mode: PS\nps { consistency: SSP shards: 1 }\ncluster { min_workers: 1 heartbeat_interval_ms: 500 }\n' \
  >> "$tmp/ps.textproto"
addr="127.0.0.1:$(free_port)"
cport=$(free_port); sport=$(free_port)
"$cohort" coordinator --job="$tmp/ps.textproto" --listen="$addr" \
  --metrics-listen="127.0.0.1:$cport" 2>"$tmp/ps-coord.err" &
pids+=($!)
wait_for 15 fetch "http://127.0.0.1:$cport/metrics"
"$cohort" ps --coordinator="$addr" --listen=127.0.0.1:0 \
  --metrics-listen="127.0.0.1:$sport" 2>"$tmp/ps.err" &
pids+=($!)
"$cohort" worker --coordinator="$addr" --quiet --min-step-ms=15 2>"$tmp/ps-w0.err" &
pids+=($!)
pushing() {
  fetch "http://127.0.0.1:$sport/metrics" > "$tmp/shard.prom" &&
    positive "$(value "$tmp/shard.prom" cohort_shard_pushes_total)" &&
    fetch "http://127.0.0.1:$cport/metrics" > "$tmp/ps-coord.prom" &&
    positive "$(value "$tmp/ps-coord.prom" "cohort_shard_pushes_total{shard=\"0\",host=\"$host\"}")"
}
if wait_for 40 pushing; then
  check_promtool shard "$tmp/shard.prom"
  check_promtool "PS coordinator" "$tmp/ps-coord.prom"
  ok "shard /metrics: $(value "$tmp/shard.prom" cohort_shard_pushes_total) pushes, $(value "$tmp/shard.prom" cohort_shard_pulls_total) pulls, $(value "$tmp/shard.prom" cohort_shard_pushed_bytes_total) bytes pushed, version $(value "$tmp/shard.prom" cohort_shard_version); coordinator sees version $(value "$tmp/ps-coord.prom" "cohort_shard_version{shard=\"0\",host=\"$host\"}")"
else
  fail "the shard's /metrics never counted pushes: $(grep -v '^#' "$tmp/shard.prom" 2>/dev/null | head -5) $(tail -2 "$tmp/ps.err" "$tmp/ps-w0.err" "$tmp/ps-coord.err")"
fi
"$cohort" stop --coordinator="$addr" >/dev/null
for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done

finish
