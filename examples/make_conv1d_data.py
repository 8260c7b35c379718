#!/usr/bin/python3
"""Writes the data of examples/conv1d_regression.textproto: inputs x of
shape [N, 3, 10000] (Gaussian noise, smoothed a little so neighbouring
steps are related) and float targets y of the same shape, y = a fixed
random 3-channel convolution of x (kernel 3, "same" padding) plus noise of
standard deviation 0.05. The mapping is one the Conv1d+BatchNorm network
can learn; the noise bounds the best test R² at about 0.99.

  make_conv1d_data.py DIR [--train N] [--test N] [--length L] [--shards K]
                          [--seed S] [--npz]

writes DIR/train_x_K.npy, DIR/train_y_K.npy (K = 0..shards-1) and
DIR/test_x.npy, DIR/test_y.npy, all float32 (or, with --npz, DIR/train_K.npz
and DIR/test.npz holding x and y). Needs NumPy (Debian: python3-numpy, run
with /usr/bin/python3).
"""
import argparse
import os

import numpy as np


def targets(x, w, rng):
    """y[:, c, t] = sum over c', k of w[c, c', k] x[:, c', t + k - 1]."""
    pad = np.pad(x, ((0, 0), (0, 0), (1, 1)))
    length = x.shape[2]
    y = np.zeros_like(x)
    for k in range(3):
        y += np.einsum("oc,nct->not", w[:, :, k], pad[:, :, k:k + length])
    return (y + rng.normal(0, 0.05, y.shape)).astype(np.float32)


def inputs(rng, n, length):
    x = rng.normal(0, 1, (n, 3, length))
    # A 3-tap moving average: inputs with some local structure.
    x[:, :, 1:-1] = (x[:, :, :-2] + x[:, :, 1:-1] + x[:, :, 2:]) / np.sqrt(3)
    return x.astype(np.float32)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--train", type=int, default=512)
    p.add_argument("--test", type=int, default=128)
    p.add_argument("--length", type=int, default=10000)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--npz", action="store_true")
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    w = rng.normal(0, 1 / 3, (3, 3, 3))  # the mapping, fixed by the seed
    splits = [("train_%d" % k, a.train // a.shards + (k < a.train % a.shards))
              for k in range(a.shards)] + [("test", a.test)]
    for name, n in splits:
        x = inputs(rng, n, a.length)
        y = targets(x, w, rng)
        if a.npz:
            np.savez(os.path.join(a.dir, name + ".npz"), x=x, y=y)
        else:
            stem = name.replace("_", "_x_", 1) if name != "test" else "test_x"
            np.save(os.path.join(a.dir, stem + ".npy"), x)
            np.save(os.path.join(a.dir, stem.replace("_x", "_y") + ".npy"), y)
    print("wrote %d training and %d test samples of [3, %d] to %s" %
          (a.train, a.test, a.length, a.dir))


if __name__ == "__main__":
    main()
