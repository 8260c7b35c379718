#!/usr/bin/python3
"""The PyTorch side of bench/pytorch_accuracy.sh: exports torchvision's
KIND (4 classes, random weights) to OUT.onnx as README.md says, then
trains that same module on the image folder DATA for STEPS steps of BATCH
samples (SGD, lr 0.02 annealed to 0 by cosine, momentum 0.9; the transforms cohort's IMAGE_FOLDER
applies with scale_min 0.5) and prints its test accuracy on DATA/val as
`accuracy A`.

  pytorch_accuracy.py KIND DATA OUT.onnx STEPS BATCH IMAGE_SIZE
"""
import sys
import warnings

import torch
import torchvision
from torch import nn
from torchvision import transforms as T

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def loaders(data, batch, size):
    train = torchvision.datasets.ImageFolder(data + "/train", T.Compose([
        T.RandomResizedCrop(size, scale=(0.5, 1.0)), T.RandomHorizontalFlip(),
        T.ToTensor(), T.Normalize(MEAN, STD)]))
    val = torchvision.datasets.ImageFolder(data + "/val", T.Compose([
        T.Resize(round(size * 256 / 224)), T.CenterCrop(size), T.ToTensor(),
        T.Normalize(MEAN, STD)]))
    g = torch.Generator().manual_seed(1)
    return (torch.utils.data.DataLoader(train, batch, shuffle=True,
                                        drop_last=True, generator=g),
            torch.utils.data.DataLoader(val, 64))


def main():
    kind, data, onnx_path = sys.argv[1:4]
    steps, batch, size = (int(a) for a in sys.argv[4:7])
    torch.manual_seed(3)
    torch.set_num_threads(2)
    m = getattr(torchvision.models, kind)(num_classes=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, torch.randn(2, 3, size, size), onnx_path,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=13)
    train, val = loaders(data, batch, size)
    opt = torch.optim.SGD(m.parameters(), lr=0.02, momentum=0.9)
    # Annealed to 0, so that the accuracy at the end is the run's and not
    # one noisy step's.
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    done = 0
    m.train()
    while done < steps:
        for x, y in train:
            opt.zero_grad()
            nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
            sched.step()
            done += 1
            if done == steps:
                break
    m.eval()
    right = total = 0
    with torch.no_grad():
        for x, y in val:
            right += (m(x).argmax(1) == y).sum().item()
            total += len(y)
    print("accuracy %.4f" % (right / total))


if __name__ == "__main__":
    main()
