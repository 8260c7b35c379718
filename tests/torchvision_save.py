#!/usr/bin/python3
"""Writes a torchvision ResNet-50's state_dict (random weights, random
BatchNorm statistics, no download) as a safetensors file under
torchvision's own names, with the model's evaluation-mode outputs on random
224x224 inputs, for `--init-from` into cohort's zoo "resnet50".

  torchvision_save.py OUT.safetensors X.npy TORCH_Y.npy
"""
import sys

import numpy as np
import torch
import torchvision

from torch_save import save


def main():
    out, x_path, y_path = sys.argv[1:4]
    torch.manual_seed(5)
    m = torchvision.models.resnet50()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    m.eval()
    save(out, m.state_dict())
    x = np.random.default_rng(3).normal(0, 1, (2, 3, 224, 224))
    x = x.astype(np.float32)
    np.save(x_path, x)
    with torch.no_grad():
        np.save(y_path, m(torch.from_numpy(x)).numpy())


if __name__ == "__main__":
    main()
