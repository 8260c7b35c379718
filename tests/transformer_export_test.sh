#!/usr/bin/env bash
# The transformer layers (embedding, positional_embedding,
# per-position layernorm, attention, transformer_block, tied_lm_head) leave
# cohort as ONNX, checked against PyTorch without the engine:
#  - tests/transformer_torch.py builds each model in Debian's python3-torch
#    (tests/torch_check.py's modules), random weights, and writes them as
#    safetensors with cohort's names, plus token ids [N, 1, L] and torch's
#    logits;
#    and checks each block against nn.TransformerEncoderLayer(norm_first);
#  - tests/torch_check.py loads that file strictly (every name, no extra
#    tensor for the tied head);
#  - onnx_from_safetensors exports it through worker/onnx_export.h;
#    python3-onnx's checker (full_check) accepts it, the tied head shares
#    the embedding's initializer, and ONNX Runtime (npm onnxruntime-node)
#    gives torch's logits within 1e-4 of the largest.
# One more comparison, the engine itself, on the GPT case (the engine reads
# bytes): --init-from the torch weights at a vanishing rate, then predict,
# export to safetensors and ONNX.
#
#   transformer_export_test.sh ONNX_FROM_SAFETENSORS COHORT
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
to_onnx="$1"
cohort="$2"
here="$(dirname "${BASH_SOURCE[0]}")"
py=/usr/bin/python3
ort_dir=${COHORT_NODE_DIR:-/opt/cohort-node}
if [[ -z "${TEST_TMPDIR:-}" ]]; then
  trap 'rm -rf "$tmp"' EXIT
fi

if ! $py -c "import torch, numpy" 2> /dev/null; then
  echo "SKIP: python3-torch is not installed (tools/setup installs it unless COHORT_SKIP_LIBTORCH=1)"
  exit 0
fi

# close NAME WANT.npy GOT.npy: largest difference within 1e-4 of the
# largest output.
close() {
  $py -c 'import numpy as np, sys
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
if a.shape != b.shape: print("shapes differ: %s and %s" % (a.shape, b.shape)); sys.exit(1)
d = np.abs(a - b).max(); r = d / max(np.abs(a).max(), 1e-12)
print("largest difference %.3g (%.3g of the largest output)" % (d, r)); sys.exit(0 if r <= 1e-4 else 1)' "$2" "$3"
}

# check_onnx NAME MODEL.onnx X.npy Y.npy: checker, shared tied weight, ORT.
check_onnx() {
  local name=$1 model=$2 x=$3 y=$4 out
  if $py -c "import onnx" 2> /dev/null; then
    if out=$($py - "$model" 2>&1 <<'PY'
import collections, sys
import onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
names = [t.name for t in m.graph.initializer]
assert len(names) == len(set(names)), "an initializer is duplicated"
users = collections.defaultdict(list)
for n in m.graph.node:
    for i in n.input:
        users[i].append(n.op_type)
tied = [k for k, v in users.items() if "Gather" in v and "MatMul" in v]
ops = collections.Counter(n.op_type for n in m.graph.node)
print("%d nodes, opset %d, %d LayerNormalization, %d Softmax, tied weight %s "
      "(Gather and MatMul)" % (len(m.graph.node), m.opset_import[0].version,
      ops["LayerNormalization"], ops["Softmax"], ",".join(tied) or "none"))
sys.exit(0 if tied else 1)
PY
); then
      ok "$name: onnx.checker.check_model(full_check=True): $out"
    else
      fail "$name: the ONNX checker or the tied-weight check refuses the export: $out"
    fi
  else
    ok "$name: SKIPPED the ONNX checker: python3-onnx is not installed (tools/setup installs it)"
  fi
  if [[ ! -f "$ort_dir/node_modules/onnxruntime-node/package.json" ]] || ! command -v node > /dev/null; then
    ok "$name: SKIPPED ONNX Runtime: onnxruntime-node is not in $ort_dir (tools/setup installs it)"
    return
  fi
  if out=$(node "$here/onnx_check.js" "$ort_dir" "$model" "$x" "$y" 2>&1); then
    ok "$name: against torch: $out"
  else
    fail "$name: ONNX Runtime against torch: $out"
  fi
}

# check_engine CASE CONTEXT: cohort trains the torch weights for one step at
# lr 1e-30 on random bytes, then predict, safetensors and ONNX export must
# all agree with torch.
check_engine() {
  local name=$1 context=$2 out d="$tmp/$1_engine"
  mkdir -p "$d"
  head -c 8192 /dev/urandom > "$d/train.txt"
  cat > "$d/job.textproto" <<SPEC
name: "${name}_engine"
model { $($py "$here/transformer_torch.py" "$name" --textproto) }
data { kind: TOKENS dir: "$d" tokens { train: "train.txt" context: $context } }
batch_size: 4
max_steps: 1
eval { disable: true }
optimizer { lr: 1e-30 }
SPEC
  if ! "$cohort" train --job="$d/job.textproto" --init-from="$tmp/$name.safetensors" \
       --checkpoint-dir="$d/ckpt" --quiet > /dev/null 2> "$d/err"; then
    fail "$name: cohort train --init-from the torch weights: $(cat "$d/err")"
    return
  fi
  local ckpt="$d/ckpt/ckpt-000000000001.cohort"
  if "$cohort" predict --checkpoint="$ckpt" --input="$tmp/${name}_x.npy" \
       --out="$d/y.npy" > /dev/null 2> "$d/err" &&
     out=$(close "$name" "$tmp/${name}_y.npy" "$d/y.npy" 2>&1); then
    ok "$name: cohort predict against torch: $out"
  else
    fail "$name: cohort predict against torch: $(cat "$d/err") ${out:-}"
  fi
  if "$cohort" export --checkpoint="$ckpt" --format=safetensors --out="$d/model.safetensors" \
       > /dev/null 2> "$d/err" &&
     out=$($py -c 'import sys; sys.path.insert(0, sys.argv[1]); import torch_check as t
a, b = t.read_safetensors(sys.argv[2])[0], t.read_safetensors(sys.argv[3])[0]
ka = [(k, tuple(v.shape)) for k, v in a.items()]; kb = [(k, tuple(v.shape)) for k, v in b.items()]
print("%d tensors, names and shapes %s torch'"'"'s" % (len(kb), "equal to" if sorted(ka) == sorted(kb) else "differ from")); sys.exit(sorted(ka) != sorted(kb))' \
       "$here" "$tmp/$name.safetensors" "$d/model.safetensors" 2>&1) &&
     out2=$($py "$here/torch_check.py" "$name" "$d/model.safetensors" "$tmp/${name}_x.npy" "$d/y.npy" 2>&1); then
    ok "$name: cohort export --format=safetensors: $out; $out2"
  else
    fail "$name: cohort export --format=safetensors: $(cat "$d/err") ${out:-} ${out2:-}"
  fi
  if "$cohort" export --checkpoint="$ckpt" --format=onnx --out="$d/model.onnx" > /dev/null 2> "$d/err"; then
    check_onnx "$name (cohort export)" "$d/model.onnx" "$tmp/${name}_x.npy" "$tmp/${name}_y.npy"
  else
    fail "$name: cohort export --format=onnx: $(cat "$d/err")"
  fi
}

for name in gpt bert; do
  if ! out=$($py "$here/transformer_torch.py" "$name" "$tmp/$name.safetensors" \
         "$tmp/${name}_x.npy" "$tmp/${name}_y.npy" 2>&1); then
    fail "$name: building the torch model: $out"
    continue
  fi
  ok "$out"
  if out=$($py "$here/torch_check.py" "$name" "$tmp/$name.safetensors" \
             "$tmp/${name}_x.npy" "$tmp/${name}_y.npy" 2>&1); then
    ok "torch_check.py rebuilds the model from the file: $out"
  else
    fail "$name: torch_check.py: $out"
  fi
  if out=$("$to_onnx" "$tmp/$name.safetensors" "$tmp/$name.onnx" 2>&1); then
    check_onnx "$name" "$tmp/$name.onnx" "$tmp/${name}_x.npy" "$tmp/${name}_y.npy"
  else
    fail "$name: onnx_from_safetensors: $out"
  fi
done
# The engine reads bytes (vocabulary 256): the GPT case.
check_engine gpt 12

finish
