#!/usr/bin/python3
"""Writes an image folder of four classes, horizontal or vertical stripes in
warm or cool colours (both survive random crops and horizontal flips),
each image with its own colours, stripe period, phase and noise, as PNG
files: DIR/train/CLASS/*.png and DIR/val/CLASS/*.png. Learnable in a few
hundred steps by a small network; an untrained one is at chance.

  make_pattern_images.py DIR [TRAIN_PER_CLASS [VAL_PER_CLASS [SIZE]]]
"""
import os
import sys

import numpy as np
from PIL import Image

CLASSES = ["cool_horizontal", "cool_vertical", "warm_horizontal",
           "warm_vertical"]


def pattern(kind, size, rng):
    y, x = np.mgrid[0:size, 0:size].astype(np.float32)
    period = rng.uniform(6, 14)
    phase = rng.uniform(0, period)
    u = y if kind.endswith("horizontal") else x
    on = (np.floor((u + phase) / period) % 2).astype(np.float32)
    warm = kind.startswith("warm")
    a = rng.uniform(0, 255, 3)
    # The dominant channel (red or blue) tells warm from cool.
    a[0 if warm else 2] = rng.uniform(170, 255)
    a[2 if warm else 0] = rng.uniform(0, 110)
    b = rng.uniform(0, 90, 3)
    img = on[..., None] * a + (1 - on[..., None]) * b
    img += rng.normal(0, 25, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def main():
    out = sys.argv[1]
    n_train = int(sys.argv[2]) if len(sys.argv) > 2 else 96
    n_val = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    rng = np.random.default_rng(17)
    for split, n in (("train", n_train), ("val", n_val)):
        for kind in CLASSES:
            d = os.path.join(out, split, kind)
            os.makedirs(d, exist_ok=True)
            for i in range(n):
                Image.fromarray(pattern(kind, size, rng)).save(
                    os.path.join(d, "%04d.png" % i))


if __name__ == "__main__":
    main()
