#!/usr/bin/env bash
# All-reduce across real links: bench/allreduce with one rank per network
# namespace, next to iperf3 between the same namespaces and next to the
# analytic bound, over veth or over an emulated link of given rate, delay
# and loss (bench/linkemu: this kernel has no sch_netem). Optionally the
# 2-worker LeNet-5 job against one worker, each worker in its own namespace.
# Needs root (namespaces, TAP devices), iproute2 and iperf3.
#
#   bench/allreduce_netns.sh [--procs=2] [--link=veth|RATE,DELAY[,LOSS]]
#       [--min=4K] [--max=64M] [--iters=10] [--algorithm=NAME]
#       [--goal=0.8] [--lenet=MNIST_DIR] [--lenet-goal=1.7] [--repeats=1]
#       [--wait=auto|spin|block] [--bin=bazel-bin]
#   --wait: how the synchronous lanes wait, in bench/allreduce and (as
#   cluster.collective_wait) in the LeNet-5 jobs; auto spins here, since
#   each namespace's rank sees no other rank on its host.
#   e.g. --link=veth   --link=10g,100us   --link=1g,100us   --link=100m,100us,0.01
#
# Hosts h1..hP run the ranks (h0 runs the coordinator of the LeNet-5 jobs).
# Columns: the measured median time and busbw (algbw x 2(P-1)/P) of cohort's
# path; iperf3's rate per direction while both directions run (--bidir:
# each rank of an all-reduce sends and receives at once), and alone; the
# bound, wire / rate + steps x delay, where wire = 2(P-1)/P x size is what
# each rank must send, rate is the emulated rate (veth: iperf3's
# bidirectional rate) and steps = the algorithm's minimum number of
# message latencies (2 ceil(log2 P) for halving_doubling/bcube, 2(P-1) for
# ring); "delays" = (time - wire / rate) / one-way delay, the latencies the
# all-reduce actually cost. Over veth the one-way delay is half a measured
# TCP round trip between the namespaces.
# Exit 1 when, over veth, cohort's busbw is below --goal x iperf3 (bidir)
# at any size from 1 MiB up, or (with --lenet) 2 workers reach less than
# --lenet-goal x one worker's samples/s; the numbers are printed either way.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
procs=2 link=veth min=4K max=64M iters=10 algorithm="" goal=0.8
lenet="" lenet_goal=1.7 repeats=1 bin=bazel-bin goal_rc=0 wait_mode=auto
for arg in "$@"; do
  case "$arg" in
    --procs=*) procs="${arg#*=}" ;;
    --link=*) link="${arg#*=}" ;;
    --min=*) min="${arg#*=}" ;;
    --max=*) max="${arg#*=}" ;;
    --iters=*) iters="${arg#*=}" ;;
    --algorithm=*) algorithm="${arg#*=}" ;;
    --goal=*) goal="${arg#*=}" ;;
    --lenet=*) lenet="${arg#*=}" ;;
    --lenet-goal=*) lenet_goal="${arg#*=}" ;;
    --repeats=*) repeats="${arg#*=}" ;;
    --bin=*) bin="${arg#*=}" ;;
    --wait=*) wait_mode="${arg#*=}" ;;
    *) sed -n '2,30p' "$0" >&2; exit 2 ;;
  esac
done
allreduce="$bin/bench/allreduce" linkemu="$bin/bench/linkemu" cohort="$bin/cli/cohort"
[[ -x "$allreduce" ]] || { echo "no $allreduce: bazel build //bench:allreduce" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "iperf3 is not installed (apt-get install iperf3)" >&2; exit 2; }
[[ -z "$lenet" || -x "$cohort" ]] || { echo "no $cohort: bazel build //cli:cohort" >&2; exit 2; }

tmp="$(mktemp -d)"
pids=()
source "$here/../tests/netns_lib.sh"
netns_require
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; netns_cleanup; rm -rf "$tmp"' EXIT
hosts=$((procs + 1))

rate_bps=0 delay_s=0 loss=0
if [[ "$link" == veth ]]; then
  netns_setup "$hosts"
  link_text="veth pairs to a bridge"
else
  IFS=, read -r rate delay loss <<<"$link"
  loss="${loss:-0}"
  [[ -x "$linkemu" ]] || { echo "no $linkemu: bazel build //bench:linkemu" >&2; exit 2; }
  rate_bps=$(/usr/bin/python3 -c "import sys; t=sys.argv[1].lower(); u={'k':1e3,'m':1e6,'g':1e9}.get(t[-1],1); print(float(t.rstrip('kmg'))*u)" "$rate")
  delay_s=$(/usr/bin/python3 -c "import sys; t=sys.argv[1]; u=[(s,f) for s,f in (('ns',1e-9),('us',1e-6),('ms',1e-3),('s',1.0)) if t.endswith(s)][0]; print(float(t[:-len(u[0])])*u[1])" "$delay")
  # The switch's namespace holds the TAP devices until each moves to its host.
  sw="${netns_prefix}sw"
  ip netns add "$sw" && netns_made+=("$sw")
  taps=""
  for ((i = 0; i < hosts; i++)); do taps+="${taps:+,}t$i"; done
  ip netns exec "$sw" "$linkemu" --taps="$taps" --rate="$rate" --delay="$delay" \
    --loss="$loss" >"$tmp/linkemu.out" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do grep -q ready "$tmp/linkemu.out" && break; sleep 0.1; done
  grep -q ready "$tmp/linkemu.out" || { cat "$tmp/linkemu.out" >&2; exit 1; }
  netns_tap_hosts "$sw" "$hosts"
  link_text="emulated link $rate, one-way delay $delay, loss $loss ($(head -1 "$tmp/linkemu.out"))"
fi

# iperf3 h1 -> h2: alone, then both directions at once.
iperf() {  # iperf FLAGS...: prints the slower direction's receive rate, bit/s
  on h2 iperf3 -s -1 -B "$(netns_addr h2)" >/dev/null 2>&1 &
  local server=$!
  pids+=($server)
  sleep 0.3
  on h1 iperf3 -c "$(netns_addr h2)" -t 3 -J "$@" >"$tmp/iperf.json" 2>&1
  wait "$server" 2>/dev/null
  /usr/bin/python3 - "$tmp/iperf.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["end"]
rates = [r["sum_received"]["bits_per_second"]]
if "sum_received_bidir_reverse" in r:
    rates.append(r["sum_received_bidir_reverse"]["bits_per_second"])
print(min(rates))
PY
}
iperf_uni=$(iperf)
iperf_bidir=$(iperf --bidir)
# One-way delay: half the median round trip of a 1-byte TCP ping-pong.
port=29555
on h2 /usr/bin/python3 -c "
import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('$(netns_addr h2)', $port)); s.listen(1); c,_=s.accept()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    b=c.recv(1)
    if not b: break
    c.sendall(b)" &
pids+=($!)
sleep 0.3
rtt_s=$(on h1 /usr/bin/python3 -c "
import socket, time, statistics
c=socket.create_connection(('$(netns_addr h2)', $port)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
t=[]
for i in range(2000):
    a=time.perf_counter(); c.sendall(b'x'); c.recv(1); t.append(time.perf_counter()-a)
print(statistics.median(t[200:]))")
if [[ "$link" == veth ]]; then
  delay_s=$(/usr/bin/python3 -c "print($rtt_s / 2)")
  rate_bps=$iperf_bidir
fi

echo "# all-reduce across namespaces: $procs ranks (h1..h$procs), $link_text"
printf '# iperf3 h1->h2: %.2f Gbit/s alone, %.2f Gbit/s per direction with --bidir; TCP ping-pong round trip %.1f us\n' \
  "$(/usr/bin/python3 -c "print($iperf_uni/1e9)")" "$(/usr/bin/python3 -c "print($iperf_bidir/1e9)")" \
  "$(/usr/bin/python3 -c "print($rtt_s*1e6)")"

store="$tmp/store"
mkdir -p "$store"
algo_flag=()
[[ -n "$algorithm" ]] && algo_flag=(--algorithm="$algorithm")
rank_pids=()
for ((r = 0; r < procs; r++)); do
  h="h$((r + 1))"
  ip netns exec "$(netns_ns "$h")" "$allreduce" --procs="$procs" --rank="$r" \
    --store="$store" --host="$(netns_addr "$h")" --min="$min" --max="$max" \
    --iters="$iters" --wait="$wait_mode" "${algo_flag[@]}" >"$tmp/rank$r.out" 2>"$tmp/rank$r.err" &
  rank_pids+=($!)
  pids+=($!)
done
bench_rc=0
for p in "${rank_pids[@]}"; do wait "$p" || bench_rc=1; done
if [[ $bench_rc != 0 ]]; then
  echo "bench/allreduce failed:" >&2
  cat "$tmp"/rank*.out "$tmp"/rank*.err >&2
  exit 1
fi
grep -E '^# [0-9]+ processes' "$tmp/rank0.out"

/usr/bin/python3 - "$tmp/rank0.out" "$procs" "${algorithm:-halving_doubling}" \
  "$rate_bps" "$delay_s" "$iperf_uni" "$iperf_bidir" "$link" "$goal" <<'PY' || goal_rc=1
import math, sys
out, procs, algo, rate, delay, uni, bidir, link, goal = sys.argv[1:]
procs = int(procs); rate = float(rate) / 8; delay = float(delay)
uni = float(uni) / 8e9; bidir = float(bidir) / 8e9; goal = float(goal)
factor = 2 * (procs - 1) / procs
steps = 2 * (procs - 1) if algo.startswith("ring") else 2 * math.ceil(math.log2(procs))
print(f"# bound: wire/rate + {steps} x {delay*1e6:.1f} us; rate {rate*8/1e9:.2f} Gbit/s")
print("| size | time (us) | busbw GB/s | raw Gloo busbw | iperf3 bidir GB/s | busbw / iperf3 bidir | busbw / iperf3 alone | bound (us) | time / bound | delays |")
print("|---|---|---|---|---|---|---|---|---|---|")
missed = []
for line in open(out):
    if line.startswith("#") or not line.strip():
        continue
    f = line.split()
    size = int(f[0]); t = float(f[6]) * 1e-6; busbw = float(f[8]); raw = float(f[4])
    wire = factor * size
    bound = wire / rate + steps * delay
    delays = (t - wire / rate) / delay if delay > 0 else float("nan")
    name = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
    print(f"| {name} | {t*1e6:.0f} | {busbw:.3f} | {raw:.3f} | {bidir:.3f} | {busbw/bidir:.2f} | "
          f"{busbw/uni:.2f} | {bound*1e6:.0f} | {t/bound:.2f} | {delays:.1f} |")
    if link == "veth" and size >= 1 << 20 and busbw < goal * bidir:
        missed.append(name)
if missed:
    print(f"# GOAL MISSED: busbw below {goal} x iperf3 (bidir) at {', '.join(missed)}")
    sys.exit(1)
if link == "veth":
    print(f"# goal met: busbw >= {goal} x iperf3 (bidir) from 1 MiB up")
PY

if [[ -n "$lenet" ]]; then
  # LeNet-5 on MNIST, one epoch, one compute thread per worker: coordinator
  # on h0, workers on h1 (and h2), --host set to each namespace's address.
  coord="$(netns_addr h0):29400"
  lenet_run() {  # lenet_run WORKERS: prints samples/s
    local w=$1 spec="$tmp/lenet$1.textproto" i
    cat "$here/../examples/mnist_lenet5.textproto" >"$spec"
    local wait_field=""
    [[ "$wait_mode" != auto ]] && wait_field="collective_wait: WAIT_${wait_mode^^}"
    echo "cluster { min_workers: $w max_workers: $w $wait_field }" >>"$spec"
    ip netns exec "$(netns_ns h0)" "$cohort" coordinator --job="$spec" \
      --listen="$coord" --report="$tmp/lenet.json" 2>"$tmp/coord.err" &
    local cpid=$! workers=()
    pids+=($cpid)
    for ((i = 1; i <= w; i++)); do
      ip netns exec "$(netns_ns "h$i")" "$cohort" worker --coordinator="$coord" \
        --host="$(netns_addr "h$i")" --threads=1 --data-dir="$lenet" 2>"$tmp/worker$i.err" &
      workers+=($!)
      pids+=($!)
    done
    if ! wait "$cpid"; then
      echo "LeNet-5 job with $w workers failed:" >&2
      tail -3 "$tmp/coord.err" "$tmp"/worker*.err >&2
      return 1
    fi
    for i in "${workers[@]}"; do wait "$i"; done
    /usr/bin/python3 -c "import json; r=json.load(open('$tmp/lenet.json')); print(r['samples_per_s'], r['test_accuracy'])"
  }
  one=() two=()
  for ((k = 0; k < repeats; k++)); do
    read -r s1 a1 < <(lenet_run 1) || exit 1
    read -r s2 a2 < <(lenet_run 2) || exit 1
    echo "# LeNet-5 run $((k + 1)): 1 worker $s1 samples/s (test accuracy $a1), 2 workers $s2 samples/s ($a2)"
    one+=("$s1") two+=("$s2")
  done
  /usr/bin/python3 - "$lenet_goal" "${one[*]}" "${two[*]}" <<'PY' || goal_rc=1
import statistics, sys
goal = float(sys.argv[1])
one = statistics.median(map(float, sys.argv[2].split()))
two = statistics.median(map(float, sys.argv[3].split()))
print(f"# LeNet-5 across namespaces (medians): 1 worker {one:.0f} samples/s, "
      f"2 workers {two:.0f} samples/s: {two/one:.2f}x (goal {goal}x)")
if two < goal * one:
    print("# GOAL MISSED: 2 workers below the LeNet-5 goal")
    sys.exit(1)
PY
fi
exit "$goal_rc"
