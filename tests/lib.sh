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

finish() {
  echo "failures: $failures"
  [[ $failures -eq 0 ]]
}
