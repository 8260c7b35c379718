#!/usr/bin/env bash
# The GPU engine is a plugin (worker/gpu/gpu_plugin.h): the cohort binary
# maps no CUDA library unless a run asks for GPUs, runs where none is
# installed, and names the library that is missing when one is.
#
# Checked with real processes: /proc/PID/maps of a running coordinator, a
# CPU worker and `cohort status --watch`; the loader's own trace
# (LD_DEBUG=files) of `cohort --help`; --devices=gpu:0 on this GPU-less
# machine (the plugin must load and name the missing driver); a copy of the
# plugin that needs a library that does not exist; and, where this test may
# make a mount namespace, a machine with /usr/local/cuda hidden.
#
# usage: gpu_plugin_test.sh COHORT
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cohort=$(readlink -f "$1")
cuda_re='libcudart|libcublas|libcudnn|libnccl|libcuda\.so'

cat > "$tmp/job.textproto" <<'EOF'
name: "plugin-test"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: [100] train_samples: 200000 test_samples: 256 } }
batch_size: 32
epochs: 1
optimizer { kind: SGD lr: 0.05 }
cluster { min_workers: 1 max_workers: 1 }
EOF
cat > "$tmp/small.textproto" <<'EOF'
name: "plugin-test-small"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: [100] train_samples: 512 test_samples: 128 } }
batch_size: 32
max_steps: 5
optimizer { kind: SGD lr: 0.05 }
EOF

# no_cuda_mapped NAME PID: the process's maps hold no CUDA library.
no_cuda_mapped() {
  local maps
  maps=$(grep -E "$cuda_re" "/proc/$2/maps" 2>/dev/null | awk '{print $6}' | sort -u)
  if [[ ! -r /proc/$2/maps ]]; then
    fail "$1 (pid $2) was gone before its maps could be read"
  elif [[ -n "$maps" ]]; then
    fail "$1 maps CUDA libraries: $maps"
  else
    ok "$1 maps no CUDA library"
  fi
}

# --help: the loader lists every object it opens.
opened=$(LD_DEBUG=files "$cohort" --help 2>&1 >/dev/null | grep -oE 'file=[^ ]+' | grep -E "$cuda_re")
[[ -z "$opened" ]] && ok "cohort --help opens no CUDA library" \
  || fail "cohort --help opens $opened"

# A coordinator, a CPU worker training, and a status watcher, all running.
port=$(free_port)
addr="127.0.0.1:$port"
"$cohort" coordinator --job="$tmp/job.textproto" --listen="$addr" \
  > "$tmp/coordinator.log" 2>&1 &
coord=$!
pids+=("$coord")
wait_for 20 "$cohort" status --coordinator="$addr" || fail "coordinator did not start"
"$cohort" worker --coordinator="$addr" --devices=cpu:1 --quiet --min-step-ms=20 \
  > "$tmp/worker.log" 2>&1 &
worker=$!
pids+=("$worker")
"$cohort" status --coordinator="$addr" --watch > "$tmp/watch.log" 2>&1 &
watch=$!
pids+=("$watch")
wait_for 20 grep -q RUNNING "$tmp/watch.log" || fail "status --watch never showed RUNNING"
no_cuda_mapped "the coordinator" "$coord"
no_cuda_mapped "a CPU worker" "$worker"
no_cuda_mapped "cohort status --watch" "$watch"
"$cohort" stop --coordinator="$addr" > /dev/null 2>&1
wait "$worker" 2>/dev/null
kill "$watch" "$coord" 2>/dev/null

# --devices=gpu:0 here: the plugin opens (all its symbols resolve against
# this binary) and reports the missing GPU, not a missing library.
out=$("$cohort" train --job="$tmp/small.textproto" --devices=gpu:0 2>&1)
rc=$?
if grep -q "built without CUDA" <<< "$out"; then
  echo "this cohort was built without CUDA: the plugin checks below skip"
  finish
  exit $?
fi
if [[ $rc == 2 ]] && grep -qiE 'no CUDA device|CUDA driver|no NVIDIA' <<< "$out" &&
   ! grep -qiE 'cannot be loaded|undefined symbol|not installed|another version' <<< "$out"; then
  ok "--devices=gpu:0 loads the plugin and names the missing GPU"
else
  fail "--devices=gpu:0 (exit $rc): $out"
fi

# A binary and plugin copied elsewhere; the plugin then needs a library
# that does not exist, then is removed.
mkdir -p "$tmp/install/bin"
cp "$cohort" "$tmp/install/bin/cohort"
plugin="$(dirname "$cohort")/libcohort_gpu.so"
if [[ ! -f "$plugin" ]]; then
  fail "no plugin beside $cohort"
elif ! command -v patchelf > /dev/null; then
  echo "no patchelf (tools/setup installs it): missing-library check skipped"
else
  mkdir -p "$tmp/install/lib/cohort"
  cp "$plugin" "$tmp/install/lib/cohort/"
  chmod u+w "$tmp/install/lib/cohort/libcohort_gpu.so"
  patchelf --add-needed libcohort_missing_for_test.so.9 \
    "$tmp/install/lib/cohort/libcohort_gpu.so"
  out=$("$tmp/install/bin/cohort" train --job="$tmp/small.textproto" --devices=gpu:0 2>&1)
  rc=$?
  [[ $rc == 2 ]] && grep -q 'GPU training needs libcohort_missing_for_test.so.9, which cannot be loaded' <<< "$out" \
    && ok "a missing library is named (exit 2)" \
    || fail "missing library (exit $rc): $out"
  rm -rf "$tmp/install/lib"
fi
out=$("$tmp/install/bin/cohort" train --job="$tmp/small.textproto" --devices=gpu:0 2>&1)
rc=$?
[[ $rc == 2 ]] && grep -q 'libcohort_gpu.so is not installed' <<< "$out" \
  && ok "a missing plugin is named (exit 2)" || fail "missing plugin (exit $rc): $out"
"$tmp/install/bin/cohort" train --job="$tmp/small.textproto" --quiet > "$tmp/cpu.log" 2>&1 \
  && ok "without its plugin, cohort still trains on CPUs" \
  || fail "CPU training without the plugin: $(tail -3 "$tmp/cpu.log")"

# No CUDA library anywhere: /usr/local/cuda hidden in a mount namespace.
if [[ -d /usr/local/cuda ]] && unshare -m true 2>/dev/null; then
  out=$(unshare -m bash -c '
    mount -t tmpfs none /usr/local/cuda || exit 90
    "$1" train --job="$2" --quiet > /dev/null 2>&1 || exit 91
    "$1" --help > /dev/null || exit 92
    "$1" train --job="$2" --devices=gpu:0 2>&1; exit 0' _ "$cohort" "$tmp/small.textproto")
  rc=$?
  case $rc in
    90) echo "cannot mount in a namespace here: no-CUDA check skipped" ;;
    91) fail "with no CUDA library installed, CPU training failed" ;;
    92) fail "with no CUDA library installed, cohort --help failed" ;;
    *) grep -qE 'GPU training needs lib(cudart|cublas|cublasLt|cudnn|nccl)\.so' <<< "$out" \
         && ok "no CUDA installed: CPU training runs, a GPU run names the missing library" \
         || fail "no CUDA installed, --devices=gpu:0 said: $out" ;;
  esac
else
  echo "no /usr/local/cuda or no mount namespaces: no-CUDA check skipped"
fi

finish
