#!/usr/bin/env bash
# Memory is bounded by the loader, not by the image folder: training on
# 20,000 JPEGs takes the same peak anonymous memory as on 2,000, since the
# data set holds only the file index and each loader thread decodes one
# image at a time (the files themselves are page cache, which the kernel
# reclaims, not the process's own memory).
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
make="$2"

# 10 classes of small JPEGs (48x40): 200 and 2,000 a class; 320 steps of
# 64 read the big folder whole once (the small one ten times).
"$make" --out="$tmp/small" --classes=10 --train=200 --val=2 --width=48 --height=40 --format=jpg >/dev/null &
"$make" --out="$tmp/big" --classes=10 --train=2000 --val=2 --width=48 --height=40 --format=jpg --seed=2 >/dev/null &
wait

spec() {  # spec DIR
  cat <<SPEC
name: "images"
model {
  layers { conv2d { out_channels: 8 kernel: 3 stride: 2 } }
  layers { relu {} }
  layers { global_avgpool {} }
  layers { linear { out_features: 10 } }
}
data {
  kind: IMAGE_FOLDER dir: "$1"
  image_folder { classes: 10 image_size: 32 }
  loader_threads: 2
}
batch_size: 64
max_steps: 320
optimizer { lr: 0.01 }
SPEC
}

spec "$tmp/small" > "$tmp/small.textproto"
spec "$tmp/big" > "$tmp/big.textproto"
read -r rc_small peak_small <<<"$(peak_anon "$tmp/small.textproto")"
read -r rc_big peak_big <<<"$(peak_anon "$tmp/big.textproto")"
echo "peak RssAnon: $((peak_small / 1024)) MB on 2,000 JPEGs, $((peak_big / 1024)) MB on 20,000"
# The index of 18,000 more files (paths and labels) is ~2 MB; allow 8.
bound_kb=$(( peak_small + 8 * 1024 ))
absolute_kb=$(( 200 * 1024 ))
if [[ $rc_small -eq 0 && $rc_big -eq 0 && $peak_big -le $bound_kb && $peak_big -le $absolute_kb ]]; then
  ok "20,000 JPEGs trained with peak RssAnon $((peak_big / 1024)) MB, within 8 MB of 2,000 JPEGs' $((peak_small / 1024)) MB (and under $((absolute_kb / 1024)) MB)"
else
  fail "exits $rc_small/$rc_big, peak RssAnon $((peak_small / 1024)) / $((peak_big / 1024)) MB (bounds $((bound_kb / 1024)) and $((absolute_kb / 1024)) MB): $(tail -2 "$tmp/big.textproto.out")"
fi
finish
