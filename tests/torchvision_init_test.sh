#!/usr/bin/env bash
# Weights from torchvision start a cohort job: a torchvision ResNet-50's
# state_dict, saved under torchvision's own names (conv1, layer1.0.conv1,
# fc), loads into the zoo's resnet50 through --init-from, and cohort's
# outputs from those weights are torchvision's (evaluation mode, 1e-4); a
# 2-worker `cohort local` job starts from the same file named by the spec's
# init_from and keeps its weights at a vanishing learning rate. Skips where
# /usr/bin/python3 has no torchvision.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
here="$(dirname "${BASH_SOURCE[0]}")"
py=/usr/bin/python3
if ! $py -c "import torch, torchvision" 2>/dev/null; then
  echo "SKIP: $py has no torchvision (tools/setup installs python3-torchvision)"
  exit 0
fi
$py "$here/torchvision_save.py" "$tmp/tv.safetensors" "$tmp/x.npy" "$tmp/torch_y.npy" ||
  { fail "torchvision_save.py failed"; finish; exit; }

spec() {  # spec FILE [EXTRA]: resnet50 on 224x224 synthetic images
  cat > "$1" <<SPEC
name: "torchvision-init"
model { zoo: "resnet50" }
data { kind: SYNTHETIC synthetic { shape: [3, 224, 224] classes: 1000 train_samples: 8 test_samples: 2 } }
batch_size: 2
epochs: 1
eval { disable: true }
optimizer { lr: 1e-30 momentum: 0 }
$2
SPEC
}

# 1. One process, no step: the checkpoint holds torchvision's weights.
spec "$tmp/one.textproto" ""
if "$cohort" train --job="$tmp/one.textproto" --init-from="$tmp/tv.safetensors" \
     --max-steps=0 --checkpoint-dir="$tmp/one" > "$tmp/one.out" 2>&1; then
  "$cohort" predict --checkpoint="$tmp/one" --input="$tmp/x.npy" \
    --out="$tmp/cohort_y.npy" > /dev/null 2>&1
  if out=$($py -c 'import numpy as np, sys
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
d = np.abs(a - b).max() / np.abs(a).max()
print("largest difference %.3g of the largest output" % d)
sys.exit(0 if d <= 1e-4 else 1)' "$tmp/torch_y.npy" "$tmp/cohort_y.npy" 2>&1); then
    ok "torchvision's resnet50 weights in zoo resnet50: outputs as torchvision's: $out"
  else
    fail "outputs differ from torchvision's: $out"
  fi
else
  fail "train --init-from torchvision weights: $(tail -3 "$tmp/one.out")"
fi

# 2. Two workers, the file named by the spec.
spec "$tmp/two.textproto" "init_from: \"$tmp/tv.safetensors\""
if "$cohort" local --job="$tmp/two.textproto" --workers=2 --max-steps=1 \
     --checkpoint-dir="$tmp/two" --report="$tmp/two.json" > "$tmp/two.out" 2>&1 &&
   "$cohort" export --checkpoint="$tmp/two" --format=safetensors \
     --out="$tmp/two.safetensors" > /dev/null 2>&1; then
  if out=$(PYTHONPATH="$here" $py - "$tmp/tv.safetensors" "$tmp/two.safetensors" \
             "$tmp/two.json" <<'PY' 2>&1
import json, sys
from torch_check import read_safetensors
tv, _ = read_safetensors(sys.argv[1])
ours, _ = read_safetensors(sys.argv[2])
report = json.load(open(sys.argv[3]))
pairs = {"0.weight": "conv1.weight", "1.weight": "bn1.weight",
         "4.conv1.weight": "layer1.0.conv1.weight",
         "7.downsample.0.weight": "layer2.0.downsample.0.weight",
         "19.conv3.weight": "layer4.2.conv3.weight", "21.weight": "fc.weight",
         "21.bias": "fc.bias"}
worst = max(float((ours[a] - tv[b]).abs().max()) for a, b in pairs.items())
assert report["world_size"] == 2, report["world_size"]
print("world size 2, %d tensors checked, largest difference %.3g" % (len(pairs), worst))
sys.exit(0 if worst <= 1e-6 else 1)
PY
  ); then
    ok "2 workers from the spec's init_from kept torchvision's weights: $out"
  else
    fail "2 workers from init_from: $out"
  fi
else
  fail "cohort local from init_from: $(tail -3 "$tmp/two.out")"
fi

# 3. A file of another model is refused, naming a tensor.
PYTHONPATH="$here" $py -c 'import sys, torchvision
from torch_save import save
save(sys.argv[1], torchvision.models.resnet18(num_classes=10).state_dict())' \
  "$tmp/r18.safetensors"
err=$("$cohort" train --job="$tmp/one.textproto" --init-from="$tmp/r18.safetensors" \
        --max-steps=0 2>&1 >/dev/null)
if [[ $? -ne 0 && "$err" == *"r18.safetensors: "*"tensor"* ]]; then
  ok "resnet18's weights for resnet50 are refused: $err"
else
  fail "resnet18's weights for resnet50: $err"
fi

finish
