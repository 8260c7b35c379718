#!/usr/bin/python3
"""Makes the float-target data sets of tests/regression_data_test.sh:

  make_tables.py csv DIR    DIR/train.csv, DIR/test.csv: columns f0..f7 and
                            y = 2 f0 - f1 + 0.5 f2 f3 + noise (sd 0.1)
  make_tables.py multilabel DIR
                            DIR/{train,test}_{x,y}.npy: x [N, 16] float32,
                            y [N, 4] float32 in {0, 1}, label k = (w_k . x > 0)
Needs NumPy (Debian: python3-numpy, run with /usr/bin/python3).
"""
import os
import sys

import numpy as np


def csv(out):
    rng = np.random.default_rng(3)
    for name, n in (("train", 2000), ("test", 500)):
        f = rng.normal(0, 1, (n, 8))
        y = 2 * f[:, 0] - f[:, 1] + 0.5 * f[:, 2] * f[:, 3]
        y += rng.normal(0, 0.1, n)
        with open(os.path.join(out, name + ".csv"), "w") as fh:
            fh.write(",".join(["f%d" % i for i in range(8)] + ["y"]) + "\n")
            for row, target in zip(f, y):
                fh.write(",".join("%.6f" % v for v in row) +
                         ",%.6f\n" % target)


def multilabel(out):
    rng = np.random.default_rng(4)
    w = rng.normal(0, 1, (4, 16))
    for name, n in (("train", 2000), ("test", 500)):
        x = rng.normal(0, 1, (n, 16)).astype(np.float32)
        y = (x @ w.T > 0).astype(np.float32)
        np.save(os.path.join(out, name + "_x.npy"), x)
        np.save(os.path.join(out, name + "_y.npy"), y)


if __name__ == "__main__":
    os.makedirs(sys.argv[2], exist_ok=True)
    {"csv": csv, "multilabel": multilabel}[sys.argv[1]](sys.argv[2])
