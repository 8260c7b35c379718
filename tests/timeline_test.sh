#!/usr/bin/env bash
# --timeline: a 2-worker all-reduce job (with checkpoints) and a 2-worker
# parameter-server job write one Chrome trace per worker; each must be
# valid trace-event JSON with every phase of a step present and sane times.
# Also: `cohort train --timeline`, and an unwritable path refused up front.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
timeline_layers="$2"

# check_trace FILE PHASE...: valid JSON, complete events with ts/dur >= 0,
# lanes named, every PHASE present; prints the count of each phase.
check_trace() {
  /usr/bin/python3 - "$@" <<'PY'
import collections, json, sys
path, phases = sys.argv[1], sys.argv[2:]
trace = json.load(open(path))
events = trace["traceEvents"]
complete = [e for e in events if e["ph"] == "X"]
meta = {(e["name"], e["tid"]) for e in events if e["ph"] == "M"}
problems = []
for e in complete:
    if not (isinstance(e["ts"], int) and isinstance(e["dur"], int)
            and e["ts"] > 1.5e15 and e["dur"] >= 0):
        problems.append("bad times: %r" % e)
    if ("thread_name", e["tid"]) not in meta:
        problems.append("unnamed lane %r" % e["tid"])
counts = collections.Counter(e["name"] for e in complete)
missing = [p for p in phases if counts[p] == 0]
if missing:
    problems.append("missing phases: %s" % ", ".join(missing))
print("%s: %d events: %s" % (path.split("/")[-1], len(complete),
      ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
if problems:
    print("\n".join(problems[:5]))
    sys.exit(1)
PY
}

cat > "$tmp/ar.textproto" <<SPEC
name: "timeline"
model { zoo: "lenet_cifar" }
data { kind: SYNTHETIC synthetic { shape: [3, 32, 32] train_samples: 512 test_samples: 128 } }
batch_size: 16
epochs: 1
optimizer { lr: 0.05 momentum: 0.9 }
checkpoint { dir: "$tmp/ckpt" every_steps: 4 }
cluster { bucket_bytes: 65536 }
SPEC
if "$cohort" local --job="$tmp/ar.textproto" --workers=2 --timeline="$tmp/ar.json" \
    >"$tmp/ar.out" 2>&1; then
  # Rank 0 writes the checkpoints; either file may be rank 0's.
  rank0=$(grep -l '"worker rank 0' "$tmp"/ar.w*.json)
  other=$(grep -L '"worker rank 0' "$tmp"/ar.w*.json)
  if out0=$(check_trace "$rank0" data forward backward allreduce "allreduce wait" optimizer checkpoint evaluate) \
      && out1=$(check_trace "$other" data forward backward allreduce optimizer evaluate); then
    ok "all-reduce timelines: $out0 | $out1"
  else
    fail "all-reduce timelines: $out0 $out1"
  fi
  buckets=$(/usr/bin/python3 -c "import json,sys; print(len({e['args']['bucket'] for e in json.load(open(sys.argv[1]))['traceEvents'] if e['name']=='allreduce'}))" "$rank0")
  [[ "$buckets" -ge 2 ]] && ok "each bucket's all-reduce is its own event ($buckets buckets)" \
    || fail "expected several buckets, got '$buckets'"
else
  fail "all-reduce job: $(cat "$tmp/ar.out")"
fi

cat > "$tmp/ps.textproto" <<'SPEC'
name: "timeline-ps"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 1024 test_samples: 256 } }
batch_size: 32
epochs: 1
optimizer { lr: 0.05 momentum: 0.9 }
mode: PS
ps { shards: 1 }
SPEC
if "$cohort" local --job="$tmp/ps.textproto" --workers=2 --timeline="$tmp/ps" >"$tmp/ps.out" 2>&1 \
    && out=$(check_trace "$tmp/ps.w0.json" data forward backward push pull evaluate); then
  ok "parameter-server timeline: $out"
else
  fail "parameter-server timeline: ${out:-} $(tail -5 "$tmp/ps.out")"
fi

if "$cohort" train --job="$tmp/ps.textproto" --timeline="$tmp/train.json" --quiet >/dev/null 2>&1 \
    && out=$(check_trace "$tmp/train.json" data forward backward optimizer evaluate); then
  ok "cohort train timeline: $out"
else
  fail "cohort train --timeline: ${out:-}"
fi

# --timeline-layers: each layer's forward and backward, inside the step's
# own forward and backward on the same lane, named by position; then the
# summary tool reads the trace back.
cat > "$tmp/layers.textproto" <<'SPEC'
model {
  layers { conv2d { out_channels: 8 kernel: 3 padding: 1 no_bias: true } }
  layers { batchnorm2d {} } layers { relu {} }
  layers { residual { out_channels: 16 stride: 2 } }
  layers { branch { combine: SUM paths { layers { conv2d { out_channels: 16 kernel: 1 } } }
    paths {} } }
  layers { global_avgpool {} } layers { linear { out_features: 10 } }
}
data { kind: SYNTHETIC synthetic { shape: [3, 16, 16] train_samples: 256 test_samples: 64 } }
batch_size: 16
max_steps: 8
optimizer { lr: 0.05 momentum: 0.9 }
SPEC
check_layer_trace() {
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
steps = [e for e in events if e["name"] in ("forward", "backward")]
layers = [e for e in events if "pass" in e.get("args", {})]
problems = []
for e in layers:
    inside = [s for s in steps if s["tid"] == e["tid"] and s["name"] == e["args"]["pass"]
              and s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"]]
    if not inside:
        problems.append("outside its step's %s: %r" % (e["args"]["pass"], e))
names = {e["name"].split(" ", 1)[0] for e in layers}
for want in ("0", "3", "3.conv1", "3.downsample.0", "4.paths.0.0", "6"):
    if want not in names:
        problems.append("no layer %s in %s" % (want, sorted(names)))
passes = {e["args"]["pass"] for e in layers}
if passes != {"forward", "backward"}:
    problems.append("passes %s" % passes)
print("%d layer events, %d positions" % (len(layers), len(names)))
if problems:
    print("\n".join(problems[:5]))
    sys.exit(1)
PY
}
if "$cohort" train --job="$tmp/layers.textproto" --timeline="$tmp/layers.json" \
    --timeline-layers --threads=2 --quiet >"$tmp/layers.out" 2>&1 \
    && out=$(check_layer_trace "$tmp/layers.json"); then
  ok "cohort train --timeline-layers: $out"
else
  fail "cohort train --timeline-layers: ${out:-} $(tail -3 "$tmp/layers.out")"
fi
summary=$("$timeline_layers" "$tmp/layers.json" --against "$tmp/layers.json" --skip 2 2>&1)
if [[ $? -eq 0 && "$summary" == *"6 steps"* && "$summary" == *"conv2d"*"batchnorm2d"* \
      && "$summary" == *"3.downsample.0 conv2d("* && "$summary" == *"1.00"* ]]; then
  ok "tools/timeline-layers reads it back: $(echo "$summary" | grep -m1 " conv2d$" | tr -s ' ')"
else
  fail "tools/timeline-layers: $summary"
fi
err=$("$timeline_layers" "$tmp/train.json" 2>&1)
[[ $? -ne 0 && "$err" == *"--timeline-layers"* ]] \
  && ok "a trace without layer events is named as such: $err" \
  || fail "tools/timeline-layers on a trace without layers: $err"
echo '{"traceEvents": [{"ph": "X", "tid": 0, "name": "forward"}]}' >"$tmp/broken.json"
err=$("$timeline_layers" "$tmp/broken.json" 2>&1)
[[ $? -ne 0 && "$err" == *"event 0 (forward) has no numeric ts and dur"* ]] \
  && ok "a malformed event is named: $err" \
  || fail "tools/timeline-layers on a malformed event: $err"
if "$cohort" local --job="$tmp/layers.textproto" --workers=2 --timeline="$tmp/ll" \
    --timeline-layers >"$tmp/ll.out" 2>&1 && out=$(check_layer_trace "$tmp/ll.w1.json"); then
  ok "cohort local --timeline-layers reaches every worker: $out"
else
  fail "cohort local --timeline-layers: ${out:-} $(tail -3 "$tmp/ll.out")"
fi
for cmd in "train --job=$tmp/layers.textproto" "local --job=$tmp/layers.textproto --workers=2" \
    "worker --coordinator=127.0.0.1:1"; do
  err=$("$cohort" $cmd --timeline-layers 2>&1 >/dev/null)
  rc=$?
  [[ $rc -eq 2 && "$err" == *"--timeline-layers"*"--timeline=FILE"* ]] \
    && ok "${cmd%% *} --timeline-layers without --timeline refused: $err" \
    || fail "${cmd%% *} --timeline-layers without --timeline: exit $rc: $err"
done

err=$("$cohort" train --job="$tmp/ps.textproto" --timeline=/nonexistent/t.json 2>&1 >/dev/null)
rc=$?
[[ $rc -eq 2 || $rc -eq 1 ]] && [[ "$err" == *"--timeline"*"/nonexistent"* ]] \
  && ok "unwritable --timeline refused before training: $err" \
  || fail "unwritable --timeline: exit $rc: $err"

finish
