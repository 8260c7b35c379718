#!/usr/bin/python3
"""Exports a PyTorch model with torch.onnx.export in training mode (so that
BatchNorm and Dropout stay in the graph), with random inputs and the
model's evaluation-mode outputs on them, for `cohort import`.

  onnx_import_torch.py KIND OUT.onnx X.npy TORCH_Y.npy

KIND: small (conv, BatchNorm, ReLU, max pool, flatten, dropout, linear,
SiLU, GELU), resnet18, mobilenet_v2 and mobilenet_v3_small (torchvision's,
10 classes, 3x32x32), squeezenet1_1 (3x64x64), concat (an Inception-style block of three paths),
softmax_prelu_upsample (nn.Softmax over the channels and the features,
nn.PReLU per channel and shared, nn.Upsample nearest and bilinear),
interpolate (F.interpolate by 1.5, which cohort cannot express),
conv_forms (rectangular and padding="same" Conv2d, ConvTranspose2d).
"""
import sys
import warnings

import numpy as np
import torch
import torchvision
from torch import nn


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1, groups=4),
            nn.BatchNorm2d(8), nn.SiLU(), nn.AvgPool2d(2))
        self.head = nn.Sequential(
            nn.Dropout(0.2), nn.Linear(8 * 4 * 4, 32), nn.GELU(),
            nn.Linear(32, 10, bias=False), nn.LeakyReLU(0.1), nn.Linear(10, 10))

    def forward(self, x):
        x = self.features(x)
        return self.head(x.view(x.size(0), -1))


class Inception(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a = nn.Conv2d(c, 4, 1)
        self.b = nn.Sequential(nn.Conv2d(c, 4, 1), nn.ReLU(),
                               nn.Conv2d(4, 6, 3, padding=1))
        self.c = nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.Conv2d(c, 2, 1))

    def forward(self, x):
        return torch.cat([self.a(x), self.b(x), self.c(x)], 1)


def concat_model():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        Inception(8), nn.BatchNorm2d(12), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(12, 5))


class SoftmaxPreluUpsample(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 6, 3, padding=1), nn.PReLU(6),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(6, 4, 3, stride=2, padding=1), nn.BatchNorm2d(4),
            nn.PReLU(), nn.Upsample(scale_factor=3, mode="bilinear"),
            nn.Softmax(dim=1), nn.MaxPool2d(4))
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(4 * 6 * 6, 10), nn.PReLU(10),
            nn.Softmax(dim=1))

    def forward(self, x):
        return self.head(self.features(x))


class Interpolate(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return nn.functional.interpolate(self.conv(x), scale_factor=1.5)


class ConvForms(nn.Module):
    """A (1, 7) / (7, 1) pair, padding="same" with an even kernel (the
    odd zero below and to the right) and a dilated odd one, a (2, 1)
    stride, and a grouped ConvTranspose2d with output_padding."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.row = nn.Conv2d(8, 8, (1, 7), padding=(0, 3))
        self.col = nn.Conv2d(8, 8, (7, 1), padding=(3, 0))
        self.same = nn.Conv2d(8, 6, 4, padding="same")
        self.dilated = nn.Conv2d(6, 6, 3, padding="same", dilation=2)
        self.down = nn.Conv2d(6, 6, 3, stride=(2, 1), padding=1, bias=False)
        self.up = nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1,
                                     output_padding=1, groups=2)
        # No global pooling: its average over the map would leave outputs
        # that hardly depend on the input.
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * 12 * 24, 5))

    def forward(self, x):
        x = torch.relu(self.stem(x))
        x = torch.relu(self.col(self.row(x)))
        x = torch.relu(self.dilated(self.same(x)))
        return self.head(torch.relu(self.up(self.down(x))))


def export_same_padding():
    """torch 1.13 cannot export padding="same" (aten::_convolution_mode);
    later versions write Conv with auto_pad SAME_UPPER, as this does."""
    from torch.onnx import symbolic_helper

    @symbolic_helper.parse_args("v", "v", "v", "is", "s", "is", "i")
    def convolution_mode(g, x, weight, bias, stride, padding, dilation,
                         groups):
        if padding != "same":
            raise SystemExit("only padding=\"same\" is exported here")
        args = [x, weight]
        if not symbolic_helper._is_none(bias):
            args.append(bias)
        return g.op("Conv", *args,
                    kernel_shape_i=symbolic_helper._get_tensor_sizes(
                        weight)[2:],
                    strides_i=stride, auto_pad_s="SAME_UPPER",
                    dilations_i=dilation, group_i=groups)

    torch.onnx.register_custom_op_symbolic("aten::_convolution_mode",
                                           convolution_mode, 13)


def build(kind):
    if kind == "small":
        return Small(), (3, 16, 16)
    if kind == "resnet18":
        return torchvision.models.resnet18(num_classes=10), (3, 32, 32)
    if kind == "concat":
        return concat_model(), (3, 12, 12)
    if kind == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(num_classes=10), (3, 32, 32)
    if kind == "squeezenet1_1":
        return torchvision.models.squeezenet1_1(num_classes=10), (3, 64, 64)
    if kind == "mobilenet_v3_small":
        return (torchvision.models.mobilenet_v3_small(num_classes=10),
                (3, 32, 32))
    if kind == "softmax_prelu_upsample":
        return SoftmaxPreluUpsample(), (3, 8, 8)
    if kind == "interpolate":
        return Interpolate(), (3, 8, 8)
    if kind == "conv_forms":
        export_same_padding()
        return ConvForms(), (3, 12, 12)
    raise SystemExit("unknown kind " + kind)


def main():
    kind, onnx_path, x_path, y_path = sys.argv[1:5]
    torch.manual_seed(7)
    m, shape = build(kind)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
            if isinstance(mod, nn.PReLU):  # away from the 0.25 start
                mod.weight.uniform_(-0.5, 0.5)
        # Running statistics of real activations: with made-up ones the
        # MobileNets' ReLU6 and hardswish saturate in evaluation mode and
        # every input gives the same outputs, which would compare nothing.
        bns = [b for b in m.modules() if isinstance(b, nn.BatchNorm2d)]
        for b in bns:
            b.momentum = None  # a cumulative average
        m.train()
        m(torch.randn(16, *shape))
        for b in bns:
            b.momentum = 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, torch.randn(2, *shape), onnx_path,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=13)
    # The export's forward pass in training mode moved the running
    # statistics; the file holds them as they are now, and so does m.
    m.eval()
    x = np.random.default_rng(3).normal(0, 1, (4,) + shape).astype(np.float32)
    np.save(x_path, x)
    with torch.no_grad():
        np.save(y_path, m(torch.from_numpy(x)).numpy())


if __name__ == "__main__":
    main()
