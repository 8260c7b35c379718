#!/usr/bin/env bash
# `cohort layers`: every layer kind of job.proto's LayerSpec is listed, each
# kind's page names its fields with their types and comments, and an
# unknown kind is refused naming the nearest one.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
proto="$2"

# The kinds as job.proto declares them: the fields of LayerSpec's oneof.
mapfile -t want < <(awk '/^message LayerSpec/ {m = 1} m && /oneof kind/ {o = 1; next}
  o && /^  }/ {exit} o && /= [0-9]+;/ {sub(/ =.*/, ""); print $NF}' "$proto")
mapfile -t got < <("$cohort" layers | awk 'NR > 1 {print $1}')
if [[ ${#want[@]} -gt 20 && "${want[*]}" == "${got[*]}" ]]; then
  ok "cohort layers lists the ${#got[@]} kinds of job.proto"
else
  fail "cohort layers lists ${got[*]}; job.proto has ${want[*]}"
fi

bad=0
for k in "${got[@]}"; do
  page=$("$cohort" layers "$k" 2>&1) || { fail "cohort layers $k: $page"; bad=1; }
  [[ "$(head -1 <<<"$page")" == "$k" ]] || { fail "cohort layers $k: $page"; bad=1; }
done
[[ $bad == 0 ]] && ok "every kind's page prints"

page=$("$cohort" layers conv2d)
if [[ "$page" == *"out_channels: int32. Output channels. Required."* \
      && "$page" == *"stride: int32. Default 1."* && "$page" == *"nn.Conv2d"* ]]; then
  ok "conv2d's page: its fields, types and comments"
else
  fail "conv2d's page: $page"
fi
page=$("$cohort" layers branch)
[[ "$page" == *"combine: one of CONCAT, SUM"* ]] && ok "an enum field lists its values" ||
  fail "branch's page: $page"

err=$("$cohort" layers conv 2>&1 >/dev/null)
if [[ $? -ne 0 && "$err" == *'no layer kind "conv"; did you mean conv1d?'* ]]; then
  ok "an unknown kind: $err"
else
  fail "an unknown kind: $err"
fi

finish
