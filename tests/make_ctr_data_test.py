#!/usr/bin/python3
"""tools/make-ctr-data: the same seed writes the same bytes, the training
files are one stream however many there are, gzip holds the same text, every
line has the Criteo layout, and meta.json describes the data (click rate near
25%, a Bayes AUC in [0.7, 0.95]). Bad flags exit 2 with a message.

  make_ctr_data_test.py MAKE_CTR_DATA

Skips (passes, saying so) when /usr/bin/python3 has no NumPy.
"""
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

ROWS, TEST_ROWS = 20000, 2000
failures = 0


def check(ok, what):
    global failures
    print(("ok: " if ok else "FAIL: ") + what)
    failures += 0 if ok else 1


def make(tool, out, *flags):
    return subprocess.run(["/usr/bin/python3", tool, "--out", out, *flags],
                          capture_output=True, text=True)


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read()


def split_text(out, meta, split):
    return b"".join(read(os.path.join(out, f)) for f in meta["files"][split])


def check_lines(text, dense, categorical):
    lines = text.decode("ascii").split("\n")
    check(lines[-1] == "", "the text ends with a newline")
    cell_dense = re.compile(r"^(-?[0-9]+)?$")
    cell_hex = re.compile(r"^([0-9a-f]{8})?$")
    bad = 0
    clicks = 0
    for line in lines[:-1]:
        cells = line.split("\t")
        ok = (len(cells) == 1 + dense + categorical and cells[0] in "01" and
              cells[0] != "" and
              all(cell_dense.match(c) for c in cells[1:1 + dense]) and
              all(cell_hex.match(c) for c in cells[1 + dense:]))
        bad += 0 if ok else 1
        clicks += cells[0] == "1"
    check(bad == 0, f"every line is a label, {dense} integers and "
          f"{categorical} hexadecimal cells ({bad} bad of {len(lines) - 1})")
    return len(lines) - 1, clicks


def check_meta(meta, out):
    check(meta["rows"] == {"train": ROWS, "test": TEST_ROWS},
          f"meta.json rows: {meta['rows']}")
    check(meta["files"]["train"] == ["train-00000.txt", "train-00001.txt",
                                     "train-00002.txt"],
          f"meta.json training files: {meta['files']['train']}")
    check(meta["seed"] == 5, "meta.json seed")
    cards = meta["cardinalities"]
    check(len(cards) == 26 and min(cards) >= 10 and max(cards) == 5000,
          f"26 cardinalities in [10, --vocab 5000]: {cards}")
    for split in ("train", "test"):
        rate, auc = meta["click_rate"][split], meta["bayes_auc"][split]
        check(0.2 <= rate <= 0.3, f"{split} click rate {rate:.3f} near 0.25")
        check(0.7 <= auc <= 0.95, f"{split} bayes_auc {auc:.3f} in [0.7, 0.95]")
        text = split_text(out, meta, split)
        rows, clicks = check_lines(text, 13, 26)
        check(rows == meta["rows"][split] and
              abs(clicks / rows - rate) < 1e-9,
              f"{split}: {rows} lines, {clicks} clicks, as meta.json says")


def main(tool):
    if subprocess.run(["/usr/bin/python3", "-c", "import numpy"],
                      capture_output=True).returncode != 0:
        print("SKIP: /usr/bin/python3 has no NumPy (Debian: python3-numpy)")
        return 0
    tmp = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    flags = ["--train-rows", str(ROWS), "--test-rows", str(TEST_ROWS),
             "--seed", "5", "--vocab", "5000"]
    a, b, one, gz = (os.path.join(tmp, d) for d in ("a", "b", "one", "gz"))
    for out, extra in ((a, ["--files", "3"]), (b, ["--files", "3"]),
                       (one, []), (gz, ["--files", "3", "--gzip"])):
        r = make(tool, out, *flags, *extra)
        check(r.returncode == 0, f"make-ctr-data {' '.join(extra)}: "
              f"exit {r.returncode} {r.stderr.strip()}")
    with open(os.path.join(a, "meta.json")) as f:
        meta = json.load(f)
    for name in sorted(os.listdir(a)):
        check(read(os.path.join(a, name)) == read(os.path.join(b, name)),
              f"{name}: the same bytes from the same seed")
    with open(os.path.join(one, "meta.json")) as f:
        meta_one = json.load(f)
    check(split_text(a, meta, "train") == split_text(one, meta_one, "train"),
          "3 training files concatenate to the 1-file output")
    with open(os.path.join(gz, "meta.json")) as f:
        meta_gz = json.load(f)
    check(meta_gz["files"]["train"][0] == "train-00000.txt.gz" and
          split_text(gz, meta_gz, "train") == split_text(a, meta, "train"),
          "--gzip writes the same text, decompressed")
    check_meta(meta, a)
    r = make(tool, os.path.join(tmp, "bad"), "--files", "0")
    check(r.returncode == 2 and "--files: must be >= 1, got 0" in r.stderr,
          f"--files 0 is refused: exit {r.returncode}, "
          f"{r.stderr.strip().splitlines()[-1:]}")
    r = make(tool, os.path.join(tmp, "bad"), "--train-rows", "2", "--files", "3")
    check(r.returncode == 2 and "every file needs a row" in r.stderr,
          "--files past --train-rows is refused")
    print(f"failures: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
