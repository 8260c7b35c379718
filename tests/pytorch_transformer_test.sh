#!/usr/bin/env bash
# Transformers written in PyTorch come into cohort through torch.onnx.export
# and `model { onnx }` (tests/pytorch_transformer.py): nn.TransformerEncoder
# under a causal mask, and a GPT written by hand (attention from one
# Linear(D, 3D) split three ways, masked_fill, GELU, LayerNormalization).
# For each: one SGD step on the same batch of token windows gives every
# parameter PyTorch's float64 step (within 1e-4, or PyTorch's own float32
# distance); the safetensors export loads strictly into the PyTorch module
# under its own names and reproduces `cohort predict` (1e-4). The GPT's
# blocks become transformer_blocks. Then a graph
# whose attention is not cohort's (a scale left out) is refused in one line
# naming its Softmax. Skips where /usr/bin/python3 has no torch.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
here="$(dirname "${BASH_SOURCE[0]}")"
py=/usr/bin/python3
if ! $py -c "import torch, onnx" 2>/dev/null; then
  echo "SKIP: $py has no torch or onnx (tools/setup installs python3-torch and python3-onnx)"
  exit 0
fi

# roundtrip KIND: prepare, one step in cohort, export, predict, compare.
roundtrip() {
  local kind=$1 d="$tmp/$1"
  mkdir -p "$d"
  if ! $py "$here/pytorch_transformer.py" prepare "$kind" "$d" > "$d/prepare.out" 2>&1; then
    fail "$kind: the PyTorch side failed: $(tail -3 "$d/prepare.out")"
    return
  fi
  cat > "$d/job.textproto" <<SPEC
name: "$kind"
model { onnx: "m.onnx" }
data { kind: TOKENS dir: "$d"
       tokens { train: "train.npy" test: "train.npy" context: 16 vocab_size: 32 } }
batch_size: 8
max_steps: 1
optimizer { lr: 0.1 }
eval { disable: true }
SPEC
  step_and_compare "$kind" "$d" "$cohort" "$py" "$here/pytorch_transformer.py"
}

roundtrip encoder
roundtrip gpt

# The GPT's names, attention tensors included, in the checkpoint.
show=$("$cohort" checkpoint show "$tmp/gpt/ckpt/ckpt-000000000001.cohort" 2>&1)
if [[ "$show" == *"h.0.attn.c_attn.weight"* && "$show" == *"h.1.mlp.2.bias"* ]]; then
  ok "checkpoint show lists the GPT's own names (h.0.attn.c_attn.weight, ...)"
else
  fail "checkpoint show: $(head -c 600 <<< "$show")"
fi

# The GPT's pre-norm blocks arrive as two residual branches each and train
# as one transformer_block each (fused kernels), under the same names.
if "$cohort" import --onnx="$tmp/gpt/m.onnx" --out="$tmp/gpt/import.textproto" \
     > "$tmp/gpt/import.out" 2>&1 &&
   [[ $(grep -c "transformer_block" "$tmp/gpt/import.textproto") -eq 2 ]] &&
   grep -q '"h.1.mlp.2.weight"' "$tmp/gpt/import.textproto"; then
  ok "the GPT's blocks import as 2 transformer_blocks that keep the module names"
else
  fail "the GPT's blocks: $(cat "$tmp/gpt/import.out"; grep -c transformer_block "$tmp/gpt/import.textproto")"
fi

# Attention that is not cohort's: the same GPT dividing its scores by
# 1/sqrt(d) instead of multiplying.
if [[ -f "$tmp/gpt/m.onnx" ]]; then
  $py - "$tmp/gpt/m.onnx" "$tmp/rescaled.onnx" <<'PY'
import sys, onnx
m = onnx.load(sys.argv[1])
for n in m.graph.node:
    if n.op_type == "Mul" and n.name.startswith("/h.0/attn/Mul"):
        n.op_type = "Div"
onnx.save(m, sys.argv[2])
PY
  err=$("$cohort" import --onnx="$tmp/rescaled.onnx" --out="$tmp/rescaled.textproto" 2>&1)
  rc=$?
  if [[ $rc -eq 2 && $(wc -l <<< "$err") -eq 1 && "$err" == *"Softmax"* &&
        "$err" == *"not self-attention as cohort computes it"* ]]; then
    ok "attention computing something else is refused in one line: ${err:0:160}..."
  else
    fail "rescaled attention: rc $rc: $err"
  fi
fi
finish
