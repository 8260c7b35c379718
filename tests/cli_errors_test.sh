#!/usr/bin/env bash
# Bad input to `cohort train` gets one clear line on stderr and exit code 2.
# Each case names what was wrong and where.
set -u
cohort="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

# expect_error NEEDLE ARGS...: exit 2, one stderr line containing NEEDLE.
expect_error() {
  local needle="$1"
  shift
  local err rc
  err=$("$cohort" "$@" 2>&1 >/dev/null)
  rc=$?
  if [[ $rc -ne 2 ]]; then
    echo "FAIL: cohort $* exited $rc, want 2 (stderr: $err)"
    failures=$((failures + 1))
  elif [[ "$err" != *"$needle"* ]]; then
    echo "FAIL: cohort $*: stderr lacks \"$needle\": $err"
    failures=$((failures + 1))
  elif [[ $(printf '%s\n' "$err" | wc -l) -ne 1 ]]; then
    echo "FAIL: cohort $*: want one line, got: $err"
    failures=$((failures + 1))
  else
    echo "ok: $needle"
  fi
}

good="$tmp/good.textproto"
cat > "$good" <<'SPEC'
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 64 test_samples: 16 } }
batch_size: 8
epochs: 1
optimizer { lr: 0.1 }
SPEC

# Flags.
expect_error 'unknown command "trian"' trian
expect_error '--job=FILE is required' train
expect_error 'unknown flag --epoch' train --job="$good" --epoch=3
expect_error '--epochs must be an integer' train --job="$good" --epochs=x
expect_error '--devices must be cpu:N' train --job="$good" --replicas=4
expect_error '--devices must be cpu:N' train --job="$good" --devices=cpu:0
expect_error 'no CUDA device' train --job="$good" --devices=gpu:all
expect_error 'not both' train --job="$good" --devices=cpu:1 --replicas=cpu:2
expect_error '--threads must be an integer' train --job="$good" --threads=0

# Spec files.
expect_error 'missing.textproto' train --job="$tmp/missing.textproto"
printf 'model { zoo: "mlp_seed" \nbatch_size: 8\n' > "$tmp/syntax.textproto"
expect_error 'syntax.textproto:' train --job="$tmp/syntax.textproto"
printf 'model { zoo: "mlp_seed" }\nbatch_size: 8\nepochs: 1\nbogus: 3\n' > "$tmp/unknown.textproto"
expect_error 'unknown.textproto:4:' train --job="$tmp/unknown.textproto"
sed 's/mlp_seed/lenet9/' "$good" > "$tmp/model.textproto"
expect_error 'unknown zoo model "lenet9"' train --job="$tmp/model.textproto"
printf 'model { layers { lstm { units: 3 } } }\nbatch_size: 8\nepochs: 1\noptimizer { lr: 0.1 }\n' > "$tmp/layer.textproto"
expect_error 'layer.textproto:1:18' train --job="$tmp/layer.textproto"
cat > "$tmp/shapes.textproto" <<'SPEC'
model { layers { linear { out_features: 50 } } layers { conv2d { out_channels: 4 kernel: 3 } } }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 64 test_samples: 16 } }
batch_size: 8
epochs: 1
optimizer { lr: 0.1 }
SPEC
expect_error 'layer 1' train --job="$tmp/shapes.textproto"

# Data files.
mnist_spec="$tmp/mnist.textproto"
printf 'model { zoo: "lenet5" }\ndata { kind: MNIST }\nbatch_size: 8\nepochs: 1\noptimizer { lr: 0.1 }\n' > "$mnist_spec"
mkdir -p "$tmp/empty"
expect_error 'train-images-idx3-ubyte' train --job="$mnist_spec" --data-dir="$tmp/empty"

# A tiny valid MNIST set (2 train, 2 test images), then one bad file in it.
valid_mnist() {
  local dir="$1" split
  mkdir -p "$dir"
  for split in train t10k; do
    { printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x1c\x00\x00\x00\x1c'
      head -c 1568 /dev/zero; } > "$dir/$split-images-idx3-ubyte"
    printf '\x00\x00\x08\x01\x00\x00\x00\x02\x03\x07' > "$dir/$split-labels-idx1-ubyte"
  done
}
valid_mnist "$tmp/trunc"
# The header promises 60000 images; only 2 are there.
printf '\x00\x00\x08\x03\x00\x00\xea\x60\x00\x00\x00\x1c\x00\x00\x00\x1c' \
  | cat - <(head -c 1568 /dev/zero) > "$tmp/trunc/train-images-idx3-ubyte"
expect_error 'train-images-idx3-ubyte' train --job="$mnist_spec" --data-dir="$tmp/trunc"
valid_mnist "$tmp/badmagic"
printf '\x00\x00\x09\x99\x00\x00\x00\x02\x00\x00\x00\x1c\x00\x00\x00\x1c' \
  | cat - <(head -c 1568 /dev/zero) > "$tmp/badmagic/train-images-idx3-ubyte"
expect_error '0x00000803' train --job="$mnist_spec" --data-dir="$tmp/badmagic"
valid_mnist "$tmp/badlabel"
printf '\x00\x00\x08\x01\x00\x00\x00\x02\x03\x0c' > "$tmp/badlabel/train-labels-idx1-ubyte"
expect_error 'train-labels-idx1-ubyte' train --job="$mnist_spec" --data-dir="$tmp/badlabel"
valid_mnist "$tmp/badgz"
rm "$tmp/badgz/train-images-idx3-ubyte"
printf 'this is not gzip' > "$tmp/badgz/train-images-idx3-ubyte.gz"
expect_error 'train-images-idx3-ubyte.gz' train --job="$mnist_spec" --data-dir="$tmp/badgz"
mkdir -p "$tmp/goodmnist" && valid_mnist "$tmp/goodmnist"
if ! "$cohort" train --job="$mnist_spec" --data-dir="$tmp/goodmnist" --quiet >/dev/null 2>&1; then
  echo "FAIL: the valid tiny MNIST set does not train, so the cases above prove nothing"
  failures=$((failures + 1))
fi

cifar_spec="$tmp/cifar.textproto"
printf 'model { zoo: "lenet_cifar" }\ndata { kind: CIFAR10 }\nbatch_size: 8\nepochs: 1\noptimizer { lr: 0.1 }\n' > "$cifar_spec"
mkdir -p "$tmp/cifar"
head -c 3073 /dev/zero > "$tmp/cifar/test_batch.bin"
head -c 3000 /dev/zero > "$tmp/cifar/data_batch_1.bin"
expect_error 'data_batch_1.bin' train --job="$cifar_spec" --data-dir="$tmp/cifar"
mkdir -p "$tmp/cifar_none"
head -c 3073 /dev/zero > "$tmp/cifar_none/test_batch.bin"
expect_error 'data_batch' train --job="$cifar_spec" --data-dir="$tmp/cifar_none"

# A port that accepts connections but never answers: --connect-timeout
# bounds the join (it used to take gRPC's own 20 s, then print a stray
# "Timer list shutdown" line).
/usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True); time.sleep(60)' > "$tmp/silent.port" &
silent=$!
for _ in $(seq 50); do [[ -s "$tmp/silent.port" ]] && break; sleep 0.1; done
start=$SECONDS
out=$("$cohort" worker --coordinator="127.0.0.1:$(cat "$tmp/silent.port")" --connect-timeout=2 2>&1)
rc=$?
took=$((SECONDS - start))
kill "$silent" 2>/dev/null
if [[ $rc -ne 0 && $took -le 5 && "$out" == *"within 2s"* && "$out" != *"Timer list"* ]]; then
  echo "ok: a silent port: exit $rc after ${took} s: $out"
else
  echo "FAIL: a silent port: exit $rc after ${took} s (want <= 5 s, naming the 2 s): $out"
  failures=$((failures + 1))
fi

# A guessable job token works but is warned about.
printf 'x\n' > "$tmp/short.token"
out=$(timeout 5 "$cohort" status --coordinator=127.0.0.1:1 --token-file="$tmp/short.token" --timeout=1 2>&1)
if [[ "$out" == *"warning: the job token in $tmp/short.token has only 1 characters"* ]]; then
  echo "ok: a one-character token is warned about"
else
  echo "FAIL: no warning for a one-character token: $out"
  failures=$((failures + 1))
fi

# And a good run exits 0 and writes its report.
if "$cohort" train --job="$good" --quiet --report="$tmp/r.json" >/dev/null 2>&1 \
    && grep -q '"samples_per_s"' "$tmp/r.json"; then
  echo "ok: good spec trains and reports"
else
  echo "FAIL: good spec did not train"
  failures=$((failures + 1))
fi

echo "$failures failures"
[[ $failures -eq 0 ]]
