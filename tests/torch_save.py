#!/usr/bin/python3
"""Writes the state_dict of a freshly initialised torch.nn model as a
safetensors file (by hand: the 1.13 Debian PyTorch has no safetensors
package), and the model's outputs on random inputs, for `cohort train
--init-from`.

  torch_save.py OUT.safetensors X.npy TORCH_Y.npy [--bad-shape]

The model is nn.Sequential(Linear(100, 32), ReLU(), Linear(32, 10)).
--bad-shape writes a second layer of 16 outputs instead.
"""
import json
import struct
import sys

import numpy as np
import torch
from torch import nn


def save(path, state, metadata=None):
    """`metadata` (strings) joins the header's __metadata__."""
    meta = {"format": "pt"}
    meta.update(metadata or {})
    header, blobs, offset = {"__metadata__": meta}, [], 0
    for name, t in state.items():
        a = t.detach().numpy()
        dtype = {"float32": "F32", "int64": "I64"}[str(a.dtype)]
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    out, x_path, y_path = sys.argv[1:4]
    torch.manual_seed(11)
    width = 16 if "--bad-shape" in sys.argv else 10
    m = nn.Sequential(nn.Linear(100, 32), nn.ReLU(), nn.Linear(32, width))
    save(out, m.state_dict())
    x = np.random.default_rng(3).normal(0, 1, (12, 100)).astype(np.float32)
    np.save(x_path, x)
    with torch.no_grad():
        np.save(y_path, m(torch.from_numpy(x)).numpy())


if __name__ == "__main__":
    main()
