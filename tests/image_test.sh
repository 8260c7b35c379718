#!/usr/bin/env bash
# The CPU container image, built and run for real (Podman, or Docker where
# it works): tools/build-images makes the debian:12-slim base with
# debootstrap (cached under /var/cache/cohort-images) and builds
# deploy/docker/Dockerfile's runtime-prebuilt target around the cohort
# binary Bazel built. Then:
#   1. ldd inside the image finds every library and no CUDA library, and no
#      CUDA library file is anywhere in the image; it runs as user 10001;
#   2. a coordinator and two workers, each a container of the image on a
#      container network of their own, default flags, the job spec mounted
#      read-only: the job SUCCEEDS (the report in a mounted directory);
#   3. `podman stop` (SIGTERM through tini) stops a worker of a running job
#      after its step in flight, long before the engine's SIGKILL.
# Skips (exit 0, "SKIP: reason") when not root, when no container engine
# works, or when the Debian archive cannot be reached to make the base.
# Removes every container, network and image it made (the cached base and
# runtime-base images stay).
# Usage: image_test.sh COHORT_BINARY
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_images="$root/tools/build-images"
# Bazel's strict action environment leaves the sbin directories out;
# debootstrap, chroot and netavark's iptables live there.
export PATH="$PATH:/usr/sbin:/sbin"

skip() { echo "SKIP: $*"; exit 0; }
[[ $(id -u) -eq 0 ]] || skip "not root (the test runs rootful Podman; rootless needs subordinate ids set up)"
engine_env="$("$build_images" env 2>"$tmp/env.err")" ||
  skip "no working container engine: $(tail -1 "$tmp/env.err")"
eval "$engine_env"  # engine=podman|docker, and CONTAINERS_CONF for podman
echo "engine: $engine ($("$engine" --version))"

id=$$
tag="localhost/cohort-image-test:$id"
net="cohort-image-test-$id"
label="cohort-image-test=$id"
cleanup() {
  local c
  for c in $("$engine" ps -aq --filter "label=$label" 2>/dev/null); do
    "$engine" rm -f "$c" >/dev/null 2>&1
  done
  "$engine" network rm "$net" >/dev/null 2>&1
  "$engine" rmi "$tag" >/dev/null 2>&1
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
}
trap cleanup EXIT

# 0. The image.
start=$SECONDS
"$build_images" runtime "$cohort" "$tag" > "$tmp/build.out" 2>&1
rc=$?
if [[ $rc -eq 3 ]]; then
  skip "$(grep "tools/build-images:" "$tmp/build.out" | tail -1)"
elif [[ $rc -ne 0 ]]; then
  # An engine that cannot start a container at all is this host's lack,
  # not the image's: say exactly what failed.
  if probe=$("$engine" run --rm --network=none docker.io/library/debian:12-slim true 2>&1); then
    fail "tools/build-images runtime (exit $rc): $(tail -5 "$tmp/build.out")"
    finish
    exit
  fi
  skip "$engine cannot run a container here: $probe"
fi
ok "built $tag around $cohort in $((SECONDS - start)) s ($("$engine" image inspect --format '{{.Size}}' "$tag" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"

run() { "$engine" run --rm --label "$label" "$@"; }

# 1. Libraries, CUDA, user.
ldd_out=$(run --entrypoint ldd "$tag" /usr/local/bin/cohort 2>&1)
cuda_re='libcuda|libcudart|libnccl|libcudnn|libcublas'
if [[ -z "$ldd_out" ]] || grep -q "not found" <<< "$ldd_out"; then
  fail "ldd in the image: $(grep "not found" <<< "$ldd_out" || echo "$ldd_out")"
elif grep -qE "$cuda_re" <<< "$ldd_out"; then
  fail "cohort in the image links CUDA: $(grep -E "$cuda_re" <<< "$ldd_out")"
else
  ok "ldd in the image: $(grep -c "=> /" <<< "$ldd_out") libraries found, no CUDA library"
fi
cuda_files=$(run --user 0 --entrypoint find "$tag" / -xdev \
  \( -name 'libcuda*' -o -name 'libcudart*' -o -name 'libnccl*' -o -name 'libcudnn*' -o -name 'libcublas*' \) -print 2>&1)
if [[ -z "$cuda_files" ]]; then
  ok "no CUDA library file anywhere in the image"
else
  fail "CUDA libraries in the image: $cuda_files"
fi
user=$("$engine" image inspect --format '{{.Config.User}}' "$tag")
uid=$(run --entrypoint id "$tag" -u 2>&1)
if [[ "$user" == 10001:10001 && "$uid" == 10001 ]]; then
  ok "the image runs as user 10001 (USER $user)"
else
  fail "the image's user is '$user', id -u says '$uid' (want 10001)"
fi

# 2. A job across three containers on a network of their own: workers reach
# the coordinator by its container name, and each other by the address
# their default flags advertise.
if ! "$engine" network create "$net" > "$tmp/net.out" 2>&1; then
  fail "$engine network create: $(cat "$tmp/net.out")"
  finish
  exit
fi
mkdir -p "$tmp/job" "$tmp/out"
chmod 0777 "$tmp/out"  # written by user 10001
cat > "$tmp/job/job.textproto" <<'SPEC'
name: "image"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 2048 test_samples: 256 } }
batch_size: 32
epochs: 2
optimizer { lr: 0.05 momentum: 0.9 }
cluster { min_workers: 2 max_workers: 2 }
SPEC
sed 's/^epochs: 2$/epochs: 100000/; s/^name: "image"/name: "image-long"/' \
  "$tmp/job/job.textproto" > "$tmp/job/long.textproto"
chmod -R a+rX "$tmp/job"

# start NAME ARGS...: a detached container of the image on the network.
start() {
  local name="$1"
  shift
  "$engine" run -d --label "$label" --name "$name-$id" --network "$net" \
    -v "$tmp/job:/job:ro" -v "$tmp/out:/out" "$tag" "$@" > /dev/null 2>> "$tmp/run.err" ||
    fail "$engine run $name: $(tail -2 "$tmp/run.err")"
}
exit_code() { "$engine" inspect --format '{{.State.ExitCode}}' "$1-$id" 2>/dev/null; }
running() { [[ "$("$engine" inspect --format '{{.State.Running}}' "$1-$id" 2>/dev/null)" == true ]]; }
logs() { "$engine" logs "$1-$id" 2>&1 | grep -v "^failed to connect to syslog" | tail -"${2:-3}"; }

start coord coordinator --job=/job/job.textproto --report=/out/report.json
start w1 worker --coordinator="coord-$id:29400"
start w2 worker --coordinator="coord-$id:29400"
started=$SECONDS
done_() { ! running coord && ! running w1 && ! running w2; }
if wait_for 120 done_; then
  result=$(/usr/bin/python3 -c "import json; r = json.load(open('$tmp/out/report.json')); print(r['state'], r['world_size'], '%.2f%%' % (100 * r['test_accuracy']))" 2>&1)
  codes="$(exit_code coord) $(exit_code w1) $(exit_code w2)"
  if [[ "$codes" == "0 0 0" && "$result" == "SUCCEEDED 2 "* ]]; then
    ok "coordinator + 2 workers as containers: job SUCCEEDED with 2 workers in $((SECONDS - started)) s (report: $result; $(logs coord 1 | sed 's/^I [0-9:.]* //'))"
  else
    fail "the job in containers: exits $codes, report '$result'; coordinator: $(logs coord 4); w1: $(logs w1 2)"
  fi
else
  fail "the job in containers did not end within 120 s; coordinator: $(logs coord 4)"
fi
"$engine" rm -f "coord-$id" "w1-$id" "w2-$id" > /dev/null 2>&1

# 3. SIGTERM through tini: `stop` with a 20 s grace period, after which the
# engine would SIGKILL (exit 137).
start coord coordinator --job=/job/long.textproto
start w1 worker --coordinator="coord-$id:29400" --quiet --min-step-ms=5
start w2 worker --coordinator="coord-$id:29400" --quiet --min-step-ms=5
stepping() {
  "$engine" exec "coord-$id" cohort status --coordinator=127.0.0.1:29400 --json 2>/dev/null |
    grep -q '"step": "[1-9]'
}
if wait_for 60 stepping; then
  sleep 1
  t0=$(date +%s.%N)
  "$engine" stop -t 20 "w1-$id" > /dev/null 2>&1
  took=$(/usr/bin/python3 -c "print('%.2f' % ($(date +%s.%N) - $t0))")
  code=$(exit_code w1)
  said=$(logs w1 1)
  if [[ "$code" != 137 ]] && grep -q "stopped by a termination signal" <<< "$said" &&
     /usr/bin/python3 -c "import sys; sys.exit(0 if $took < 10 else 1)"; then
    ok "$engine stop ended a training worker in $took s through tini (exit $code): $said"
  else
    fail "$engine stop of a worker: $took s, exit $code (137 is SIGKILL), said: $(logs w1 3)"
  fi
else
  fail "the long job never trained: $(logs coord 4)"
fi

finish
