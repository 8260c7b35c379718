# Shared by the multi-process shell tests (sourced, never run): a temp dir,
# pass/fail counting, processes killed at exit, free ports and polling.
# A test script sources it, appends the pids it starts to `pids`, and ends
# with `finish`.
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done' EXIT

# Messages are also kept in $tmp/messages.out (a test may check them).
fail() { echo "FAIL: $*" | tee -a "$tmp/messages.out"; failures=$((failures + 1)); }
ok() { echo "ok: $*" | tee -a "$tmp/messages.out"; }

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

# expect_refused NAME REGEX COMMAND...: COMMAND must exit 2 within 10 s with
# exactly one line on stderr that matches REGEX (grep -E), and no crash.
# expect_refused_text takes the text literally instead.
expect_refused() { refused_as -E "$@"; }
expect_refused_text() { refused_as -F "$@"; }
refused_as() {
  local how=$1 name=$2 want=$3
  shift 3
  local start=$SECONDS err rc
  err=$(timeout 30 "$@" 2>&1 >/dev/null)
  rc=$?
  if [[ $rc != 2 ]]; then
    fail "$name: exit $rc, want 2: $err"
  elif grep -qE 'Check failed|bad_alloc|terminate called|core dumped' <<< "$err"; then
    fail "$name: crashed: $err"
  elif [[ $(printf '%s\n' "$err" | wc -l) != 1 ]]; then
    fail "$name: want one line, got: $err"
  elif ! grep -q "$how" -- "$want" <<< "$err"; then
    fail "$name: stderr lacks \"$want\": $err"
  elif (( SECONDS - start > 10 )); then
    fail "$name: took $((SECONDS - start)) s: $err"
  else
    ok "$name: $err"
  fi
}

# expect_accuracy MIN NAME COMMAND...: COMMAND (a training run; its output
# kept in $tmp/NAME.out) must exit 0 with a final test accuracy of at
# least MIN percent.
expect_accuracy() {
  local min=$1 name=$2
  shift 2
  local out="$tmp/${name// /_}.out" rc acc
  "$@" > "$out" 2>&1
  rc=$?
  acc=$(sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$out" | tail -1)
  if [[ $rc -eq 0 && -n "$acc" ]] && awk -v a="$acc" -v m="$min" 'BEGIN { exit !(a >= m) }'; then
    ok "$name: test accuracy $acc%"
  else
    fail "$name: exit $rc, test accuracy '${acc}' (want >= $min%): $(tail -3 "$out")"
  fi
}

# peak_anon SPEC: runs "$cohort" train on SPEC (its output in SPEC.out),
# samples the process's RssAnon every 50 ms, prints "EXIT PEAK_KB". The
# process joins $pids, for the test's cleanup.
peak_anon() {
  "$cohort" train --job="$1" --quiet > "$1.out" 2>&1 &
  local p=$! peak=0 kb
  pids+=($p)
  while kill -0 "$p" 2>/dev/null; do
    kb=$(awk '/^RssAnon:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
    [[ -n "$kb" && "$kb" -gt "$peak" ]] && peak=$kb
    sleep 0.05
  done
  wait "$p"
  echo "$? $peak"
}

# step_and_compare NAME DIR COHORT PY SCRIPT: trains DIR/job.textproto one
# step into DIR/ckpt, exports it to DIR/cohort.safetensors, predicts
# DIR/x.npy into DIR/cohort_y.npy, then runs `PY SCRIPT compare NAME DIR
# DIR/cohort.safetensors DIR/cohort_y.npy` and reports its line.
step_and_compare() {
  local name=$1 d=$2 cohort=$3 py=$4 script=$5 out
  if ! "$cohort" train --job="$d/job.textproto" --checkpoint-dir="$d/ckpt" --quiet \
       > "$d/train.out" 2>&1; then
    fail "$name: train: $(tail -3 "$d/train.out")"
    return
  fi
  if ! "$cohort" export --checkpoint="$d/ckpt" --format=safetensors --out="$d/cohort.safetensors" \
       > "$d/export.out" 2>&1 ||
     ! "$cohort" predict --checkpoint="$d/ckpt" --input="$d/x.npy" --out="$d/cohort_y.npy" \
       > "$d/predict.out" 2>&1; then
    fail "$name: export or predict: $(tail -3 "$d/export.out" "$d/predict.out")"
    return
  fi
  if out=$("$py" "$script" compare "$name" "$d" "$d/cohort.safetensors" "$d/cohort_y.npy" 2>&1); then
    ok "$name: $out"
  else
    fail "$name: $out"
  fi
}

finish() {
  echo "failures: $failures"
  [[ $failures -eq 0 ]]
}

# newest_step DIR: the step of DIR's newest checkpoint (ckpt-STEP.cohort),
# or 0 when it has none.
newest_step() {
  local f
  f=$(ls "$1" 2>/dev/null | grep -E '^ckpt-[0-9]+\.cohort$' | sort | tail -1)
  [[ -n "$f" ]] && echo $((10#${f:5:12})) || echo 0
}
