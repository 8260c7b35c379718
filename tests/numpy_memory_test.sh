#!/usr/bin/env bash
# Memory is bounded by the loader, not by the data set: a NUMPY data set
# of sparse .npy files twice as large as this machine's available memory
# trains (a few steps) with the same peak anonymous memory as one 32 times
# smaller. The inputs are memory-mapped, so what is read is page cache,
# which the kernel reclaims, not the process's own memory.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"

avail_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
sample_bytes=$((3 * 224 * 224 * 4))
big_n=$(( (avail_kb * 1024 * 2) / sample_bytes + 1 ))
small_n=$(( big_n / 32 ))

# make_set DIR N: sparse float32 inputs [N, 3, 224, 224] and uint8 labels
# [N] (all zero: class 0), written as a header and a hole.
make_set() {
  mkdir -p "$1"
  /usr/bin/python3 - "$1" "$2" <<'PY'
import struct, sys
out, n = sys.argv[1], int(sys.argv[2])
def npy(path, descr, shape, item):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode())
        size = f.tell()
        for d in shape:
            item *= d
        f.truncate(size + item)
npy(out + "/x.npy", "<f4", (n, 3, 224, 224), 4)
npy(out + "/y.npy", "|u1", (n,), 1)
PY
}

spec() {  # spec DIR
  cat <<SPEC
name: "big"
model {
  layers { conv2d { out_channels: 4 kernel: 4 stride: 4 } }
  layers { relu {} }
  layers { global_avgpool {} }
  layers { linear { out_features: 2 } }
}
data {
  kind: NUMPY dir: "$1"
  numpy { shape: 3 shape: 224 shape: 224 classes: 2
          train_x: "x.npy" train_y: "y.npy"
          test_x: "$tmp/tiny/x.npy" test_y: "$tmp/tiny/y.npy" }
}
batch_size: 16
max_steps: 12
optimizer { lr: 0.01 }
SPEC
}

make_set "$tmp/tiny" 16
make_set "$tmp/small" "$small_n"
make_set "$tmp/big" "$big_n"
spec "$tmp/small" > "$tmp/small.textproto"
spec "$tmp/big" > "$tmp/big.textproto"
read -r rc_small peak_small <<<"$(peak_anon "$tmp/small.textproto")"
read -r rc_big peak_big <<<"$(peak_anon "$tmp/big.textproto")"
big_gb=$(( big_n * sample_bytes / 1024 / 1024 / 1024 ))
echo "available memory $((avail_kb / 1024)) MB; data sets of $small_n and $big_n samples (${big_gb} GB); peak RssAnon $((peak_small / 1024)) MB and $((peak_big / 1024)) MB"
bound_kb=$(( peak_small + 64 * 1024 ))
if [[ $rc_small -eq 0 && $rc_big -eq 0 && $peak_big -le $bound_kb ]]; then
  ok "a ${big_gb} GB data set (2x available memory) trained with peak RssAnon $((peak_big / 1024)) MB, within 64 MB of the 32x smaller set's $((peak_small / 1024)) MB"
else
  fail "exits $rc_small/$rc_big, peak RssAnon $((peak_small / 1024)) / $((peak_big / 1024)) MB (bound $((bound_kb / 1024)) MB): $(tail -2 "$tmp/big.textproto.out")"
fi
finish
