#!/usr/bin/env python3
"""Image folder input pipelines, cohort against torchvision, same files, same run.

Makes a folder of ImageNet-sized JPEGs (CIFAR-10 subset records upscaled to
500x375 when ../shared/data or $COHORT_DATA_DIR has them, else -- or with
--synthetic -- synthetic images of that size)
in a temp dir, then measures images per second of the training pipeline --
read, decode, RandomResizedCrop(224), RandomHorizontalFlip, normalise,
batches of 64 -- for:
  cohort:      bench/imagefolder (the IMAGE_FOLDER data set through the real
               Loader) with 1 and 2 loader threads
  torchvision: 0.14 (Debian's python3-torchvision, with /usr/bin/python3)
               ImageFolder + transforms + DataLoader(num_workers=1 and 2,
               batch_size=64, shuffle=True)
Each run's number is the median of --passes passes over the folder after a
warm-up pass; cohort and torchvision runs alternate --rounds times and the
medians are compared. Prints both and their ratio, and exits 1 unless
cohort is at least 2x torchvision at both thread counts (per loader thread).

  bench/imagefolder.py [--images 1500] [--passes 2] [--rounds 3] [--keep DIR]

Builds //bench:imagefolder and //tests:make_image_folder with Bazel first.
Installs python3-torchvision and python3-pil with apt-get when missing.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEM_PYTHON = "/usr/bin/python3"

TORCH_BENCH = r"""
import statistics, sys, time
import torch
import torchvision
from torchvision import datasets, transforms
torch.set_num_threads(1)
folder, workers, passes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tf = transforms.Compose([
    transforms.RandomResizedCrop(224),
    transforms.RandomHorizontalFlip(),
    transforms.ToTensor(),
    transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
])
ds = datasets.ImageFolder(folder + "/train", transform=tf)
loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True,
                                     num_workers=workers,
                                     persistent_workers=True)
rates = []
for p in range(passes + 1):
    start = time.perf_counter()
    n = 0
    for x, y in loader:
        assert x.shape[1:] == (3, 224, 224)
        assert torch.isfinite(x.reshape(-1)[::4097]).all()
        n += x.shape[0]
    assert n == len(ds)
    if p > 0:  # the first pass warms up (workers, page cache)
        rates.append(n / (time.perf_counter() - start))
print("torchvision %s workers %d images_per_s %.1f"
      % (torchvision.__version__, workers, statistics.median(rates)))
"""


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, **kw)


def ensure_torchvision():
    probe = [SYSTEM_PYTHON, "-c", "import torchvision, PIL"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    run(sudo + ["apt-get", "install", "-y", "-q", "--no-install-recommends",
                "python3-torchvision", "python3-pil"])


def bazel_bin():
    env_flags = run(["bash", "-c", "source tools/bazel_env.sh && "
                     "printf '%s\\n' \"${bazel_flags[@]}\""],
                    cwd=ROOT, capture_output=True).stdout.split()
    run(["bazel", "build"] + env_flags +
        ["//bench:imagefolder", "//tests:make_image_folder"], cwd=ROOT)
    return run(["bazel", "info"] + env_flags + ["bazel-bin"], cwd=ROOT,
               capture_output=True).stdout.strip()


def make_folder(bin_dir, out, images, synthetic):
    make = os.path.join(bin_dir, "tests/make_image_folder")
    cifar = os.environ.get("COHORT_DATA_DIR",
                           os.path.join(ROOT, "..", "shared", "data"))
    cifar = os.path.join(cifar, "cifar10-subset", "cifar-10-batches-bin")
    if not synthetic and os.path.exists(os.path.join(cifar, "data_batch_1.bin")):
        run([make, "--out=" + out, "--cifar_dir=" + cifar,
             "--cifar_limit=%d" % images, "--width=500", "--height=375",
             "--format=jpg"], capture_output=True)
        return "CIFAR-10 records upscaled to 500x375", 10
    run([make, "--out=" + out, "--classes=10", "--train=%d" % (images // 10),
         "--val=1", "--width=500", "--height=375", "--format=jpg"],
        capture_output=True)
    return "synthetic 500x375 images: colors, stripes and noise", 10


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=1500)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", help="make the folder here and keep it")
    ap.add_argument("--synthetic", action="store_true",
                    help="synthetic images (noisier, larger files) even "
                    "where the CIFAR-10 subset is present")
    args = ap.parse_args()
    ensure_torchvision()
    bin_dir = bazel_bin()
    tmp = args.keep or tempfile.mkdtemp(prefix="cohort_imagefolder_")
    try:
        what, classes = make_folder(bin_dir, tmp, args.images,
                                     args.synthetic)
        files = sum(len(f) for _, _, f in os.walk(os.path.join(tmp, "train")))
        size = sum(os.path.getsize(os.path.join(d, f))
                   for d, _, fs in os.walk(os.path.join(tmp, "train"))
                   for f in fs)
        print("%d training JPEGs (%s, %.0f KB each on average) in %s"
              % (files, what, size / files / 1024, tmp))
        ok = True
        for threads in (1, 2):
            # Alternate the two, --rounds times: the machine is shared, and
            # load that comes and goes then hits both alike.
            c_rates, t_rates = [], []
            for _ in range(args.rounds):
                c = run([os.path.join(bin_dir, "bench/imagefolder"), tmp,
                         str(classes), str(threads), str(args.passes)],
                        capture_output=True).stdout.strip()
                t = run([SYSTEM_PYTHON, "-c", TORCH_BENCH, tmp, str(threads),
                         str(args.passes)], capture_output=True).stdout.strip()
                c_rates.append(float(c.split()[-1]))
                t_rates.append(float(t.split()[-1]))
                version = t.split()[1]
            cr, tr = statistics.median(c_rates), statistics.median(t_rates)
            print("cohort threads %d images_per_s %.1f  (rounds: %s)"
                  % (threads, cr, " ".join("%.0f" % r for r in c_rates)))
            print("torchvision %s workers %d images_per_s %.1f  (rounds: %s)"
                  % (version, threads, tr, " ".join("%.0f" % r for r in t_rates)))
            print("ratio (cohort / torchvision) with %d loader thread%s: %.2fx"
                  % (threads, "s" if threads > 1 else "", cr / tr))
            ok = ok and cr >= 2 * tr
        if not ok:
            print("FAIL: cohort is under 2x torchvision per loader thread")
            return 1
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
