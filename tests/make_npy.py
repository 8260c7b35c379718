#!/usr/bin/env python3
"""Makes a learnable classification set as NumPy .npy files, written by
hand (the format is a short header and the raw array), so the tests need no
NumPy: each class has a random prototype; a sample is its class prototype
plus Gaussian noise.

  make_npy.py DIR FEATURES CLASSES TRAIN_SHARDS SAMPLES_PER_SHARD TEST_SAMPLES

writes DIR/train_x_K.npy, DIR/train_y_K.npy (K = 0..TRAIN_SHARDS-1,
float32 and int64) and DIR/test_x.npy, DIR/test_y.npy.
"""
import random
import struct
import sys


def write_npy(path, descr, shape, fmt, values):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, dims)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("ascii"))
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


def split(path_x, path_y, n, protos, rng):
    xs, ys = [], []
    for _ in range(n):
        c = rng.randrange(len(protos))
        xs.extend(p + rng.gauss(0, 0.5) for p in protos[c])
        ys.append(c)
    write_npy(path_x, "<f4", (n, len(protos[0])), "f", xs)
    write_npy(path_y, "<i8", (n,), "q", ys)


def main():
    out, features, classes, shards, per_shard, test = sys.argv[1:7]
    features, classes = int(features), int(classes)
    rng = random.Random(7)
    protos = [[rng.gauss(0, 1) for _ in range(features)] for _ in range(classes)]
    for k in range(int(shards)):
        split("%s/train_x_%d.npy" % (out, k), "%s/train_y_%d.npy" % (out, k),
              int(per_shard), protos, rng)
    split(out + "/test_x.npy", out + "/test_y.npy", int(test), protos, rng)


if __name__ == "__main__":
    main()
