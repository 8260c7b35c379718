#!/usr/bin/env bash
# Gradient compression (the job spec's `compression` block) across real and
# emulated links: 2 workers, one per network namespace and one compute
# thread each, for every kind in --kinds, against one worker alone, on
# LeNet-5 (MNIST) and the zoo's resnet18_cifar (the CIFAR-10 binary
# batches). Built on tests/netns_lib.sh (namespaces, veth to a bridge) and
# bench/linkemu (links of a given rate and one-way delay: this kernel has
# no sch_netem), as bench/allreduce_netns.sh. Needs root, iproute2; iptables
# for the wire bytes, iperf3 for the links' measured rate (both optional).
#
#   bench/compression_netns.sh [--links=veth,1g,1ms,100m,1ms] [--link=L]...
#       [--models=lenet,resnet18_cifar] [--kinds=none,fp16,bf16,powersgd]
#       [--rank=4] [--warmup=10] [--min-compression-rate=R]
#       [--samples=N | --steps=N] [--repeats=1]
#       [--goal-powersgd-1g=1.6] [--goal-powersgd-100m=1.2]
#       [--max-veth-cost=0.05] [--max-acc-drop=1.0] [--wait=auto|spin|block]
#       [--mnist=DIR] [--cifar=DIR] [--job-timeout=1800] [--bin=bazel-bin]
#
# --min-compression-rate: POWERSGD's, left to the spec's default unless
# given.
# Links: `veth` or RATE,DELAY[,LOSS] (bench/linkemu's --rate, --delay,
# --loss). --links takes a list separated by ';' or by ',' alone (a `veth`
# or a rate such as 1g or 100m starts the next link); each --link=L adds
# one link, and replaces the default list.
# Run length: --samples=N training samples per job (1 worker: N / batch
# steps; 2 workers: N / (2 x batch) steps of the same per-worker batch), or
# --steps=N steps of the one-worker job (2 workers: N / 2). Default: one
# epoch of the model's training set. Every job cuts its learning rate
# tenfold for its last fifth of steps (STEP schedule), so 1- and 2-worker
# jobs see the same schedule over the same samples.
# One worker runs once per model and repeat (on the first link: it sends
# nothing to a peer). With --repeats > 1 each figure is the median.
#
# Columns: samples/s is the coordinator report's (the job's samples over its
# training time: no setup, no evaluation; for POWERSGD its warm-up steps are
# in it), as allreduce_netns.sh's LeNet-5 mode reads it; "x 1 worker" and
# "x none" divide it by one worker's and by the same link's uncompressed
# job's; test accuracy is rank 0's last evaluation after the job's samples,
# "d acc" it minus one worker's (a larger global batch and half the steps
# are in that) and minus the same link's uncompressed job's (compression
# alone), in points. The report gives no bytes on the wire (the workers'
# cohort_worker_allreduced_bytes_total counts what they hand to the
# all-reduces, not the protocol's bytes, and lives only as long as the
# worker), so the script counts them itself: an iptables rule in each
# worker's namespace counts the IP bytes it sends to the other worker
# (headers included, as the OUTPUT hook sees them: one header per
# segmentation-offload send, not per frame on the wire); "wire/step" is
# their mean per worker per step, "/ none" over the
# uncompressed job's. Without iptables those columns are left out.
#
# Exit 1 when a job fails or a goal is missed (the table is printed either
# way): 2 workers with POWERSGD reach less than --goal-powersgd-1g (over
# every link of rate 1g) or --goal-powersgd-100m (rate 100m) times one
# worker's samples/s; over veth, a kind is more than --max-veth-cost (a
# fraction) slower than none; a 2-worker job's test accuracy is more than
# --max-acc-drop points below one worker's. A goal whose link or kind was
# not run is reported as not measured.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
links_arg="veth,1g,1ms,100m,1ms" link_list=() models="lenet,resnet18_cifar"
kinds="none,fp16,bf16,powersgd" rank=4 warmup=10 min_rate="" samples="" steps=""
repeats=1 goal_1g=1.6 goal_100m=1.2 max_veth_cost=0.05 max_acc_drop=1.0
wait_mode=auto bin=bazel-bin job_timeout=1800
mnist="$root/../shared/data/mnist"
cifar="$root/../shared/data/cifar10-subset/cifar-10-batches-bin"
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" >&2; exit 2; }
for arg in "$@"; do
  case "$arg" in
    --links=*) links_arg="${arg#*=}" ;;
    --link=*) link_list+=("${arg#*=}") ;;
    --models=*) models="${arg#*=}" ;;
    --kinds=*) kinds="${arg#*=}" ;;
    --rank=*) rank="${arg#*=}" ;;
    --warmup=*) warmup="${arg#*=}" ;;
    --min-compression-rate=*) min_rate="${arg#*=}" ;;
    --samples=*) samples="${arg#*=}" ;;
    --steps=*) steps="${arg#*=}" ;;
    --repeats=*) repeats="${arg#*=}" ;;
    --goal-powersgd-1g=*) goal_1g="${arg#*=}" ;;
    --goal-powersgd-100m=*) goal_100m="${arg#*=}" ;;
    --max-veth-cost=*) max_veth_cost="${arg#*=}" ;;
    --max-acc-drop=*) max_acc_drop="${arg#*=}" ;;
    --wait=*) wait_mode="${arg#*=}" ;;
    --mnist=*) mnist="${arg#*=}" ;;
    --cifar=*) cifar="${arg#*=}" ;;
    --job-timeout=*) job_timeout="${arg#*=}" ;;
    --bin=*) bin="${arg#*=}" ;;
    *) usage ;;
  esac
done
die() { echo "compression_netns: $*" >&2; exit 2; }
[[ -n "$samples" && -n "$steps" ]] && die "give --samples or --steps, not both"
for n in "$rank" "$warmup" "$repeats" "${samples:-1}" "${steps:-1}" "$job_timeout"; do
  [[ "$n" =~ ^[0-9]+$ && "$n" -gt 0 ]] || die "'$n' is not a positive integer"
done
[[ "$wait_mode" =~ ^(auto|spin|block)$ ]] || die "--wait=$wait_mode: auto, spin or block"
for k in ${kinds//,/ }; do
  [[ "$k" =~ ^(none|fp16|bf16|powersgd)$ ]] || die "--kinds: unknown kind '$k'"
done
for m in ${models//,/ }; do
  [[ "$m" =~ ^(lenet|resnet18_cifar)$ ]] || die "--models: unknown model '$m'"
done

# "veth,1g,1ms,100m,1ms" or "veth;1g,1ms;100m,1ms" -> one link per line.
split_links() {
  /usr/bin/python3 - "$1" <<'PY'
import re, sys
text = sys.argv[1]
if ";" in text:
    links = [l for l in text.split(";") if l]
else:
    links = []
    for tok in text.split(","):
        if tok == "veth" or re.fullmatch(r"[0-9.]+(k|m|g)(bit)?", tok) or not links:
            links.append(tok)
        else:
            links[-1] += "," + tok
for l in links:
    print(l)
PY
}
if [[ ${#link_list[@]} == 0 ]]; then
  mapfile -t link_list < <(split_links "$links_arg")
fi
for l in "${link_list[@]}"; do
  [[ "$l" == veth || "$l" =~ ^[0-9.]+[kmg](bit)?,[0-9.]+(ns|us|ms|s)(,[0-9.]+)?$ ]] ||
    die "link '$l' is neither veth nor RATE,DELAY[,LOSS] (e.g. 1g,1ms)"
done

[[ -x "$bin/cli/cohort" ]] || die "no $bin/cli/cohort: bazel build //cli:cohort"
[[ -x "$bin/bench/linkemu" ]] || die "no $bin/bench/linkemu: bazel build //bench:linkemu"
pids=() linkemu_pid=""
source "$root/tests/netns_lib.sh"
netns_require
tmp="$(mktemp -d)"
# Copies, so that a rebuild during the run cannot mix two builds.
cp "$bin/cli/cohort" "$bin/bench/linkemu" "$tmp/"
cohort="$tmp/cohort" linkemu="$tmp/linkemu"
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; netns_cleanup; rm -rf "$tmp"' EXIT

# --- data sets: each model's training-set size and batch, or a skip ------
declare -A batch train_size data_dir
batch[lenet]=$(sed -n 's/^batch_size: *//p' "$root/examples/mnist_lenet5.textproto")
batch[resnet18_cifar]=32
data_dir[lenet]="$mnist" data_dir[resnet18_cifar]="$cifar"
run_models=()
for m in ${models//,/ }; do
  if [[ $m == lenet ]]; then
    if compgen -G "$mnist/train-images-idx3-ubyte*" >/dev/null &&
      compgen -G "$mnist/t10k-labels-idx1-ubyte*" >/dev/null; then
      train_size[lenet]=60000
      run_models+=(lenet)
    else
      echo "# SKIP lenet: no MNIST IDX files in $mnist (--mnist=DIR)"
    fi
  else
    bytes=$(cat "$cifar"/data_batch_*.bin 2>/dev/null | wc -c)
    if [[ $bytes -gt 0 && -f "$cifar/test_batch.bin" ]]; then
      train_size[resnet18_cifar]=$((bytes / 3073))
      run_models+=(resnet18_cifar)
    else
      echo "# SKIP resnet18_cifar: no CIFAR-10 data_batch_N.bin and test_batch.bin in $cifar (--cifar=DIR)"
    fi
  fi
done
[[ ${#run_models[@]} -gt 0 ]] || { echo "# no model has its data: nothing measured"; exit 1; }

# --- topology: h0 (coordinator), h1 and h2 (workers) over one link -------
topology_up() {  # topology_up LINK: sets link_text
  local link=$1 rate delay loss sw="${netns_prefix}sw"
  if [[ $link == veth ]]; then
    netns_setup 3
    link_text="veth pairs to a bridge"
  else
    IFS=, read -r rate delay loss <<<"$link"
    ip netns add "$sw" && netns_made+=("$sw")
    ip netns exec "$sw" "$linkemu" --taps=t0,t1,t2 --rate="$rate" --delay="$delay" \
      --loss="${loss:-0}" >"$tmp/linkemu.out" 2>&1 &
    linkemu_pid=$!
    pids+=("$linkemu_pid")
    for _ in $(seq 50); do grep -q ready "$tmp/linkemu.out" && break; sleep 0.1; done
    grep -q ready "$tmp/linkemu.out" || { cat "$tmp/linkemu.out" >&2; return 1; }
    netns_tap_hosts "$sw" 3
    link_text="emulated link $rate, one-way delay $delay, loss ${loss:-0}"
  fi
  count_setup
}

topology_down() {
  [[ -n "$linkemu_pid" ]] && kill "$linkemu_pid" 2>/dev/null && wait "$linkemu_pid" 2>/dev/null
  linkemu_pid=""
  netns_cleanup
  netns_made=()
}

# iptables counts what each worker sends to the other one.
counting=1
command -v iptables >/dev/null || counting=0
count_setup() {
  [[ $counting == 1 ]] || return 0
  if ! on h1 iptables -A OUTPUT -d "$(netns_addr h2)" 2>/dev/null ||
    ! on h2 iptables -A OUTPUT -d "$(netns_addr h1)" 2>/dev/null; then
    counting=0
    echo "# iptables cannot count in a namespace here: no wire bytes"
  fi
}
count_zero() { [[ $counting == 0 ]] || { on h1 iptables -Z OUTPUT; on h2 iptables -Z OUTPUT; }; }
count_read() {  # count_read HOST: bytes HOST sent to its peer since count_zero
  on "$1" iptables -L OUTPUT -v -x -n | awk 'NR > 2 { print $2; exit }'
}

# iperf3 h1 -> h2 for 2 s: the rate the link actually carries, bit/s.
link_rate() {
  command -v iperf3 >/dev/null || return 0
  on h2 timeout 15 iperf3 -s -1 -B "$(netns_addr h2)" >/dev/null 2>&1 &
  local server=$!
  pids+=("$server")
  sleep 0.3
  on h1 iperf3 -c "$(netns_addr h2)" -t 2 -J >"$tmp/iperf.json" 2>&1
  wait "$server" 2>/dev/null
  /usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['end']
print('%.3f' % (r['sum_received']['bits_per_second'] / 1e9))" "$tmp/iperf.json" 2>/dev/null
}

# --- job specs -----------------------------------------------------------
model_spec() {  # model_spec MODEL: the spec without run length or schedule
  if [[ $1 == lenet ]]; then
    grep -vE '^(epochs|max_steps|lr_schedule|name)[ :{]' "$root/examples/mnist_lenet5.textproto"
    echo 'name: "compression-lenet5"'
  else
    # No example trains resnet18_cifar: SGD with examples/cifar10_lenet's
    # momentum and weight decay.
    cat <<EOF
name: "compression-resnet18-cifar"
model { zoo: "resnet18_cifar" }
data { kind: CIFAR10 }
batch_size: ${batch[resnet18_cifar]}
optimizer { kind: SGD lr: 0.02 momentum: 0.9 weight_decay: 5e-4 }
loss: CROSS_ENTROPY
seed: 1
EOF
  fi
}

job_steps() {  # job_steps MODEL WORKERS: optimizer steps of the job
  local m=$1 w=$2 b=${batch[$1]}
  if [[ -n "$steps" ]]; then
    echo $(((steps + w - 1) / w))
  else
    local n=${samples:-${train_size[$m]}}
    echo $(((n + b * w - 1) / (b * w)))
  fi
}

write_spec() {  # write_spec MODEL WORKERS KIND FILE
  local m=$1 w=$2 kind=$3 n b=${batch[$1]}
  n=$(job_steps "$m" "$w")
  local epochs=$(((n * b * w + train_size[$m] - 1) / train_size[$m]))
  local cut=$((n * 4 / 5 > 0 ? n * 4 / 5 : 1))
  local wait_field=""
  [[ $wait_mode != auto ]] && wait_field="collective_wait: WAIT_${wait_mode^^}"
  {
    model_spec "$m"
    echo "max_steps: $n"
    echo "epochs: $epochs"
    echo "lr_schedule { kind: STEP step_size: $cut gamma: 0.1 }"
    echo "cluster { min_workers: $w max_workers: $w $wait_field }"
    case $kind in
      none) ;;
      powersgd)
        echo "compression { kind: POWERSGD rank: $rank warmup_steps: $warmup" \
          "${min_rate:+min_compression_rate: $min_rate }}"
        ;;
      *) echo "compression { kind: ${kind^^} }" ;;
    esac
  } >"$4"
}

# --- one job -------------------------------------------------------------
coord="$(netns_addr h0):29400"
results="$tmp/results.tsv"
: >"$results"
failed=0

stop_all() { local p; for p in "$@"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; }

# start_coordinator SPEC: coordinator on h0, waits until it listens.
start_coordinator() {
  ip netns exec "$(netns_ns h0)" timeout "$job_timeout" "$cohort" coordinator \
    --job="$1" --listen="$coord" --report="$tmp/report.json" 2>"$tmp/coord.err" &
  cpid=$!
  pids+=("$cpid")
  local i
  for ((i = 0; i < 300; i++)); do
    on h0 ss -Hltn "sport = :29400" | grep -q . && return 0
    kill -0 "$cpid" 2>/dev/null || break
    sleep 0.1
  done
  stop_all "$cpid"
  return 1
}

# run_job MODEL LINK WORKERS KIND REPEAT: one job; appends a row to $results.
run_job() {
  local m=$1 link=$2 w=$3 kind=$4 rep=$5 i spec="$tmp/job.textproto"
  write_spec "$m" "$w" "$kind" "$spec"
  rm -f "$tmp/report.json"
  count_zero
  local why=""
  if start_coordinator "$spec"; then
    local workers=()
    for ((i = 1; i <= w; i++)); do
      ip netns exec "$(netns_ns "h$i")" "$cohort" worker --coordinator="$coord" \
        --devices=cpu:1 --threads=1 --data-dir="${data_dir[$m]}" --quiet \
        2>"$tmp/worker$i.err" &
      workers+=($!)
      pids+=($!)
    done
    wait "$cpid" || why="the job failed (coordinator exit $?)"
    for i in "${workers[@]}"; do
      timeout 60 tail --pid="$i" -f /dev/null
      stop_all "$i"
    done
  else
    why="the coordinator refused the spec"
  fi
  local row
  if [[ -z "$why" ]] && row=$(/usr/bin/python3 - "$tmp/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
if r.get("samples_per_s") is None or r.get("test_accuracy") is None:
    sys.exit(1)
print(r["samples_per_s"], 100 * r["test_accuracy"], r["steps"], r["samples"])
PY
  ); then
    local sent=-1
    if [[ $counting == 1 && $w == 2 ]]; then
      sent=$(($(count_read h1) + $(count_read h2)))
    fi
    read -r sps acc nsteps nsamples <<<"$row"
    local per_step=-1
    [[ $sent -ge 0 && $nsteps -gt 0 ]] && per_step=$((sent / (w * nsteps)))
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$link" "$w" "$kind" "$rep" \
      "$sps" "$acc" "$nsamples" "$per_step" >>"$results"
    printf '# %s, %s, %d worker(s), %s, run %d: %.1f samples/s, %d steps, %d samples, test accuracy %.2f%%%s\n' \
      "$m" "$link" "$w" "$kind" "$rep" "$sps" "$nsteps" "$nsamples" "$acc" \
      "$([[ $per_step -ge 0 ]] && echo ", $per_step bytes/step/worker on the wire")"
  else
    why="${why:-the report has no samples/s or test accuracy}"
    echo "# FAILED: $m, $link, $w worker(s), $kind, run $rep: $why:" >&2
    tail -n 3 "$tmp/coord.err" "$tmp"/worker*.err 2>/dev/null | sed 's/^/#   /' >&2
    printf '%s\t%s\t%s\t%s\t%s\tfailed\n' "$m" "$link" "$w" "$kind" "$rep" >>"$results"
    failed=1
  fi
  rm -f "$tmp"/worker*.err
}

# --- the runs --------------------------------------------------------------
echo "# gradient compression across namespaces: $("$cohort" version 2>&1 | head -1)"
echo "# $(nproc) CPUs; coordinator on h0, workers on h1 and h2 (--threads=1);" \
  "kinds: $kinds (POWERSGD rank $rank, warm-up $warmup steps); repeats: $repeats"
for m in "${run_models[@]}"; do
  echo "# $m: batch ${batch[$m]} per worker, ${train_size[$m]} training samples;" \
    "1 worker $(job_steps "$m" 1) steps, 2 workers $(job_steps "$m" 2) steps"
done
first=1
for link in "${link_list[@]}"; do
  if ! topology_up "$link"; then
    echo "# FAILED: cannot set up link $link" >&2
    failed=1
    topology_down
    continue
  fi
  rate=$(link_rate)
  echo "# link $link: $link_text${rate:+; iperf3 h1->h2 $rate Gbit/s}"
  for m in "${run_models[@]}"; do
    for ((r = 1; r <= repeats; r++)); do
      [[ $first == 1 ]] && run_job "$m" "$link" 1 none "$r"
      for k in ${kinds//,/ }; do run_job "$m" "$link" 2 "$k" "$r"; done
    done
  done
  first=0
  topology_down
done

# --- the table and the goals -----------------------------------------------
/usr/bin/python3 - "$results" "$counting" "$goal_1g" "$goal_100m" "$max_veth_cost" \
  "$max_acc_drop" "${link_list[@]}" <<'PY'
import collections, re, statistics, sys
path, counting, goal_1g, goal_100m, veth_cost, acc_drop = sys.argv[1:7]
links = sys.argv[7:]
counting = counting == "1"
goal_1g, goal_100m = float(goal_1g), float(goal_100m)
veth_cost, acc_drop = float(veth_cost), float(acc_drop)
runs = collections.defaultdict(list)
failed = set()
order = []
for line in open(path):
    f = line.rstrip("\n").split("\t")
    key = (f[0], f[1] if f[2] == "2" else "-", int(f[2]), f[3])
    if key not in order:
        order.append(key)
    if f[5] == "failed":
        failed.add(key)
    else:
        runs[key].append(tuple(map(float, f[5:9])))

def med(key, i):
    vals = [r[i] for r in runs.get(key, []) if r[i] >= 0]
    return statistics.median(vals) if vals else None

def fmt(v, spec):
    return "-" if v is None else format(v, spec)

def ratio(a, b):
    return a / b if a is not None and b else None

cols = ["model", "link", "workers", "kind", "samples/s", "x 1 worker", "x none",
        "samples", "test acc %", "d acc vs 1 worker", "d acc vs none"]
if counting:
    cols += ["wire/step (KB)", "/ none"]
print("| " + " | ".join(cols) + " |")
print("|" + "---|" * len(cols))
for key in order:
    model, link, w, kind = key
    one = (model, "-", 1, "none")
    none = (model, link, 2, "none")
    if key in failed and not runs.get(key):
        print("| " + " | ".join([model, link, str(w), kind, "failed"] +
                                ["-"] * (len(cols) - 5)) + " |")
        continue
    sps, acc, samples, wire = (med(key, i) for i in range(4))
    row = [model, link, str(w), kind, fmt(sps, ".1f")]
    if w == 1:
        row += ["-", "-", fmt(samples, ".0f"), fmt(acc, ".2f"), "-", "-"]
    else:
        acc1, acc0 = med(one, 1), med(none, 1)
        row += [fmt(ratio(sps, med(one, 0)), ".2f"),
                fmt(ratio(sps, med(none, 0)), ".2f") if kind != "none" else "-",
                fmt(samples, ".0f"), fmt(acc, ".2f"),
                fmt(acc - acc1 if acc1 is not None else None, "+.2f"),
                fmt(acc - acc0 if acc0 is not None else None, "+.2f")
                if kind != "none" else "-"]
    if counting:
        row += [fmt(wire / 1e3 if wire is not None else None, ".1f"),
                fmt(ratio(wire, med(none, 3)), ".2f") if kind != "none" and w == 2 else "-"]
    print("| " + " | ".join(row) + " |")

# A 16-bit kind that sends about what none sends was not compressed: a build
# that reads the spec's compression block but does not apply it.
for key in order:
    wire, base = med(key, 3), med((key[0], key[1], 2, "none"), 3)
    if counting and key[3] in ("fp16", "bf16") and wire and base and wire > 0.75 * base:
        print(f"# WARNING: {key[0]} {key[3]} over {key[1]} sent {wire / base:.2f}x "
              "none's bytes a step: this build does not seem to compress")

def rate_of(link):
    m = re.match(r"([0-9.]+)([kmg])", link)
    return float(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] if m else None

missed = []
for model in dict.fromkeys(k[0] for k in order):
    one = med((model, "-", 1, "none"), 0)
    for rate, goal, name in ((1e9, goal_1g, "1g"), (1e8, goal_100m, "100m")):
        measured = [l for l in links if rate_of(l) == rate]
        got = [(l, med((model, l, 2, "powersgd"), 0)) for l in measured]
        got = [(l, s) for l, s in got if s is not None]
        if not got or one is None:
            print(f"# {model}: POWERSGD over {name} against one worker not measured")
            continue
        for l, s in got:
            ok = s >= goal * one
            print(f"# {model}: POWERSGD over {l}: {s / one:.2f}x one worker "
                  f"(goal {goal}x): {'met' if ok else 'MISSED'}")
            if not ok:
                missed.append(f"{model} POWERSGD {l}")
    if "veth" in links:
        base = med((model, "veth", 2, "none"), 0)
        if base is None:
            print(f"# {model}: the cost of compression over veth not measured (no none job)")
        for key in order:
            if key[0] == model and key[1] == "veth" and key[3] != "none":
                s = med(key, 0)
                if s is None or base is None:
                    continue
                ok = s >= (1 - veth_cost) * base
                print(f"# {model}: {key[3]} over veth {s / base:.3f}x none "
                      f"(at most {veth_cost:.0%} slower): {'met' if ok else 'MISSED'}")
                if not ok:
                    missed.append(f"{model} {key[3]} veth cost")
    acc1 = med((model, "-", 1, "none"), 1)
    checked = low = 0
    for key in order:
        acc = med(key, 1)
        if key[0] != model or key[2] != 2 or acc is None or acc1 is None:
            continue
        checked += 1
        if acc < acc1 - acc_drop:
            low += 1
            print(f"# {model}: {key[3]} over {key[1]}: test accuracy {acc:.2f}% is "
                  f"{acc1 - acc:.2f} points below one worker's (at most {acc_drop}): MISSED")
            missed.append(f"{model} {key[3]} {key[1]} accuracy")
    if checked and not low:
        print(f"# {model}: every 2-worker job within {acc_drop} points of one "
              f"worker's {acc1:.2f}%: met")
if failed:
    print(f"# FAILED jobs: {len(failed)} (see above)")
if missed:
    print("# GOALS MISSED: " + "; ".join(missed))
sys.exit(1 if missed or failed else 0)
PY
table_rc=$?
[[ $failed == 1 ]] && exit 1
exit "$table_rc"
