#!/usr/bin/env bash
# Oversized models, data sets and spec files are refused
# up front with one line and exit 2 -- naming the layer (or field), the size
# and what the machine has -- in every entry point that takes a spec, never
# a SIGABRT ("Check failed ... allocating N bytes", std::bad_alloc).
#
# usage: oversize_test.sh COHORT EXAMPLES_DIR
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cohort=$(readlink -f "$1")
examples=$(dirname "$(readlink -f "$2")")

# spec FILE MODEL [SYNTHETIC] [BATCH]: a job of MODEL on a small synthetic set.
spec() {
  local synthetic=${3:-"shape: [1, 28, 28] train_samples: 64 test_samples: 16"}
  printf 'model { %s }\ndata { kind: SYNTHETIC synthetic { %s } }\nbatch_size: %s\nepochs: 1\noptimizer { lr: 0.1 }\n%s' \
    "$2" "$synthetic" "${4:-8}" "${5:-}" > "$tmp/$1"
}
spec linear_max.textproto \
  'layers { flatten {} } layers { linear { out_features: 2147483647 } }'
spec linear_1e8.textproto \
  'layers { flatten {} } layers { linear { out_features: 100000000 } }'
spec conv_pad.textproto \
  'layers { conv2d { out_channels: 4 kernel: 1 padding: 100000 } } layers { flatten {} } layers { linear { out_features: 10 } }'
spec samples.textproto 'zoo: "mlp_seed"' \
  'shape: 100 train_samples: 100000000000 test_samples: 16'
# Past 2^63 bytes: refused by the validator itself, on any machine.
spec overflow_batch.textproto \
  'layers { conv2d { out_channels: 4 kernel: 1 padding: 100000 } } layers { global_avgpool {} } layers { linear { out_features: 10 } }' \
  "" 2000000000
spec overflow_shape.textproto 'layers { flatten {} } layers { linear { out_features: 10 } }' \
  'shape: [4294967296, 4294967296] train_samples: 64 test_samples: 16'
# 500000 x 784 parameters, values and gradients: about 3 GiB.
spec linear_3g.textproto \
  'layers { flatten {} } layers { linear { out_features: 500000 } }'
spec linear_1e8_ps.textproto \
  'layers { flatten {} } layers { linear { out_features: 100000000 } }' "" 8 \
  'mode: PS'

# Each refusal: expect_refused (tests/lib.sh). A command that accepts the
# job instead (a daemon then serves on) is stopped at 30 s.

# What the machine has, as every refusal must say.
has='this machine has [0-9.]+ [KMGT]iB available \(.+\)$'

# Five oversized cases, through `cohort train`.
expect_refused "train linear 2147483647" \
  "^cohort train: layer 1 \(linear\) needs [0-9.]+ TiB of parameters \(1685774662895 parameters.*$has" \
  "$cohort" train --job="$tmp/linear_max.textproto" --quiet
expect_refused "train linear 100000000" \
  "^cohort train: layer 1 \(linear\) needs 584.9 GiB of parameters \(78500000000 parameters.*$has" \
  "$cohort" train --job="$tmp/linear_1e8.textproto" --quiet
expect_refused "train conv2d padding 100000" \
  "^cohort train: layer 0 \(conv2d\) needs [0-9.]+ TiB of activations \(\[4, 200028, 200028\] per sample.*$has" \
  "$cohort" train --job="$tmp/conv_pad.textproto" --quiet
expect_refused "train 10^11 synthetic samples" \
  "^cohort train: data.synthetic.train_samples needs 1.5 TiB for the sampler's indices \(100000000000 samples\).*$has" \
  "$cohort" train --job="$tmp/samples.textproto" --quiet
expect_refused "train /dev/zero under ulimit -v" \
  "job spec /dev/zero is a character device, not a regular file" \
  bash -c "ulimit -v 1000000 && exec \"$cohort\" train --job=/dev/zero"

# Spec files that are not short text files: no hang, no memory.
mkfifo "$tmp/fifo"
expect_refused "train FIFO" "job spec $tmp/fifo is a FIFO that nothing writes to" \
  "$cohort" train --job="$tmp/fifo"
expect_refused "train directory" "job spec $tmp is a directory" \
  "$cohort" train --job="$tmp"
truncate -s 17M "$tmp/huge.textproto"
expect_refused "train 17 MiB spec" "huge.textproto is larger than 16 MiB" \
  bash -c "ulimit -v 1000000 && exec \"$cohort\" train --job=\"$tmp/huge.textproto\""

# Sizes past 2^63 bytes are the spec's error, pointing into the file.
expect_refused "train overflow (batch)" \
  "overflow_batch.textproto:1:1: layer 0 \(conv2d\) needs more than 8 EiB of activations.*2\^63" \
  "$cohort" train --job="$tmp/overflow_batch.textproto"
expect_refused "train overflow (shape)" \
  "overflow_shape.textproto:2:36: data.synthetic.shape: .*more than 2\^63" \
  "$cohort" train --job="$tmp/overflow_shape.textproto"

# The estimate refuses what the arithmetic allows: under a 2 GiB address
# space, a 3 GiB model.
expect_refused "train 3 GiB model under ulimit -v 2 GiB" \
  "^cohort train: layer 1 \(linear\) needs 2.9 GiB of parameters.*this machine has [0-9.]+ [MG]iB available \(ulimit -v of 2.0 GiB" \
  bash -c "ulimit -v 2097152 && exec \"$cohort\" train --job=\"$tmp/linear_3g.textproto\" --quiet"

# `cohort local`: the whole job on this machine.
expect_refused "local linear 100000000" \
  "^cohort local: layer 1 \(linear\) needs 584.9 GiB of parameters .* x 2 workers; this job \(2 workers\) needs 1.2 TiB in all and $has" \
  "$cohort" local --job="$tmp/linear_1e8.textproto"
expect_refused "local conv2d padding 100000" "layer 0 \(conv2d\) needs" \
  "$cohort" local --job="$tmp/conv_pad.textproto" --workers=1

# `cohort coordinator` holds no model: it checks the arithmetic (and the
# file), and the workers the memory.
expect_refused "coordinator /dev/zero" "job spec /dev/zero is a character device" \
  bash -c "ulimit -v 1000000 && exec \"$cohort\" coordinator --job=/dev/zero --listen=127.0.0.1:0"
expect_refused "coordinator overflow" \
  "^cohort coordinator: .*overflow_batch.textproto:1:1: layer 0 \(conv2d\) needs more than 8 EiB" \
  "$cohort" coordinator --job="$tmp/overflow_batch.textproto" --listen=127.0.0.1:0

# serve JOB: a coordinator for JOB in the background; sets $port, $coord.
serve() {
  port=$(free_port)
  "$cohort" coordinator --job="$tmp/$1" --listen="127.0.0.1:$port" \
    > "$tmp/$1.coordinator.log" 2>&1 &
  coord=$!
  pids+=("$coord")
  wait_for 20 "$cohort" status --coordinator="127.0.0.1:$port" ||
    fail "$1: the coordinator did not start"
}
# expect_job_failed JOB WANT: the coordinator ended the job FAILED with WANT.
expect_job_failed() {
  local rc
  wait_for 20 bash -c "! kill -0 $coord" || kill "$coord"
  wait "$coord"
  rc=$?
  if [[ $rc == 1 ]] && grep -qE -- "job FAILED: .*$2" "$tmp/$1.coordinator.log"; then
    ok "$1: the coordinator failed the job with the reason"
  else
    fail "$1: coordinator exit $rc: $(cat "$tmp/$1.coordinator.log")"
  fi
}

# A worker of a job the coordinator accepted (arithmetic fine) refuses it.
serve linear_1e8.textproto
expect_refused "worker linear 100000000" \
  "^cohort worker: layer 1 \(linear\) needs 584.9 GiB of parameters.*$has" \
  "$cohort" worker --coordinator="127.0.0.1:$port" --quiet
expect_job_failed linear_1e8.textproto "layer 1 \(linear\) needs 584.9 GiB"

# A parameter-server shard cannot hold its slice.
serve linear_1e8_ps.textproto
expect_refused "ps linear 100000000" \
  "^cohort ps: shard 0 at 127.0.0.1:[0-9]+ cannot serve: its 78500000000 of the job's 78500000000 parameters need [0-9.]+ GiB .*shard 0 of 1 needs .*$has" \
  "$cohort" ps --coordinator="127.0.0.1:$port" --listen=127.0.0.1:0 --quiet
expect_job_failed linear_1e8_ps.textproto "cannot serve: its 78500000000"

# The built-in examples and the zoo's small models still start, quickly.
for example in "$examples"/*.textproto; do
  start=$SECONDS
  out=$(timeout 60 "$cohort" train --job="$example" --max-steps=2 --quiet \
        --data-dir="$tmp/no-data" 2>&1)
  rc=$?
  name=$(basename "$example")
  if grep -qE 'needs .* available|2\^63|Check failed|bad_alloc' <<< "$out"; then
    fail "$name: refused: $out"
  elif [[ $rc == 0 ]] || grep -q 'no-data' <<< "$out"; then
    ok "$name: accepted ($((SECONDS - start)) s; exit $rc${out:+: $out})"
  else
    fail "$name: exit $rc: $out"
  fi
done
for zoo in lenet5 mlp_mnist resnet18_cifar; do
  [[ $zoo == resnet18_cifar ]] && shape='[3, 32, 32]' || shape='[1, 28, 28]'
  spec "$zoo.textproto" "zoo: \"$zoo\"" \
    "shape: $shape train_samples: 64 test_samples: 16"
  start=$SECONDS
  if out=$(timeout 60 "$cohort" train --job="$tmp/$zoo.textproto" \
             --max-steps=1 --quiet 2>&1) && (( SECONDS - start < 30 )); then
    ok "$zoo trains ($((SECONDS - start)) s)"
  else
    fail "$zoo: $out"
  fi
done

finish
