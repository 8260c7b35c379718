#!/usr/bin/env bash
# Your own images (data kind IMAGE_FOLDER): a folder of JPEG and PNG files
# (written by make_image_folder) trains end to end with `cohort train` and a
# 2-worker `cohort local` job; CMYK and YCCK JPEGs, 16-bit, palette,
# interlaced and gray+alpha PNGs are read; every bad file or folder is one
# line naming it, exit 2; with skip_bad_samples the bad files are skipped
# and counted in the report. With $COHORT_DATA_DIR, the CIFAR-10 subset as
# an image folder trains lenet_cifar above 30%.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
make="$2"
good="$tmp/good"
# 4 classes (a color and stripes each), 60 training and 12 validation
# images a class, 40x32, every third one a PNG.
"$make" --out="$good" --classes=4 --train=60 --val=12 --format=mixed >/dev/null

spec() {  # spec DIR [CLASSES [EXTRA]]
  cat <<SPEC
name: "images"
model {
  layers { conv2d { out_channels: 8 kernel: 3 } }
  layers { relu {} }
  layers { global_avgpool {} }
  layers { linear { out_features: ${2:-4} } }
}
data {
  kind: IMAGE_FOLDER
  dir: "$1"
  image_folder { classes: ${2:-4} image_size: 16 }
  ${3:-}
}
batch_size: 16
epochs: 4
optimizer { lr: 0.05 momentum: 0.9 }
SPEC
}
spec "$good" > "$tmp/job.textproto"

expect_accuracy 90 "cohort train on an image folder (240 JPEG and PNG files, 4 classes, 16x16 random crops)" \
  "$cohort" train --job="$tmp/job.textproto" --quiet
expect_accuracy 90 "2-worker cohort local on an image folder" \
  "$cohort" local --job="$tmp/job.textproto" --workers=2

# variant NAME: a copy of the good folder, to damage.
variant() {
  rm -rf "$tmp/$1"
  cp -r "$good" "$tmp/$1"
  spec "$tmp/$1" "${2:-4}" "${3:-}" > "$tmp/$1.textproto"
}

# Odd but valid files train.
variant odd
for kind in cmyk ycck png16 palette interlaced gray_alpha; do
  ext=jpg
  [[ $kind == cmyk || $kind == ycck ]] || ext=png
  "$make" --file="$tmp/odd/train/class_01/zz_$kind.$ext" --kind="$kind"
done
expect_accuracy 85 "CMYK and YCCK JPEGs, 16-bit, palette, interlaced and gray+alpha PNGs" \
  "$cohort" train --job="$tmp/odd.textproto" --quiet

# Bad files: the step that reads one fails, one line naming the file.
expect_bad_file() {  # expect_bad_file KIND FILE-NAME TEXT
  variant "bad_$1"
  local path="$tmp/bad_$1/train/class_02/$2"
  "$make" --file="$path" --kind="$1"
  expect_refused_text "$1 file" "$path: $3" \
    "$cohort" train --job="$tmp/bad_$1.textproto" --quiet
}
expect_bad_file corrupt corrupt.jpg "corrupt or unsupported JPEG: Empty JPEG image"
expect_bad_file truncated truncated.jpg "a truncated JPEG (no end-of-image marker)"
expect_bad_file gif photo.jpg "not a JPEG or PNG file (a GIF image)"
expect_bad_file 12bit deep.jpg "a 12-bit JPEG; only 8-bit JPEGs are supported"
expect_bad_file truncated_png cut.png "a truncated PNG (the file ends early)"
expect_bad_file empty empty.jpg "an empty file"

# Bad folders: refused before training.
variant empty_class 5
mkdir "$tmp/empty_class/train/class_09"
expect_refused_text "empty class folder" \
  "$tmp/empty_class/train/class_09: an empty class folder (no .jpg, .jpeg or .png file)" \
  "$cohort" train --job="$tmp/empty_class.textproto" --quiet
variant classes 10
expect_refused_text "class count" \
  "$tmp/classes/train has 4 class folders (class_00, class_01, class_02, class_03) but data.image_folder.classes is 10" \
  "$cohort" train --job="$tmp/classes.textproto" --quiet
variant no_val
rm -rf "$tmp/no_val/val"
expect_refused_text "no val folder" \
  "$tmp/no_val/val: no such folder; add one or set data.image_folder.val_fraction" \
  "$cohort" train --job="$tmp/no_val.textproto" --quiet
spec "$tmp/no_val" 4 > "$tmp/fraction.textproto"
sed -i 's/image_size: 16 }/image_size: 16 val_fraction: 0.2 }/' "$tmp/fraction.textproto"
expect_accuracy 90 "no val folder, val_fraction 0.2 held out" \
  "$cohort" train --job="$tmp/fraction.textproto" --quiet

# skip_bad_samples: corrupt files are replaced and counted.
variant skip 4 "skip_bad_samples: true"
for k in 1 2 3; do
  "$make" --file="$tmp/skip/train/class_0$k/bad_$k.jpg" --kind=corrupt
done
"$make" --file="$tmp/skip/train/class_00/cut.jpg" --kind=truncated
expect_accuracy 90 "skip_bad_samples trains past 4 bad files" \
  "$cohort" train --job="$tmp/skip.textproto" --quiet --report="$tmp/skip.json"
skipped=$(sed -n 's/.*"skipped_samples": \([0-9]*\).*/\1/p' "$tmp/skip.json")
# 4 bad files read once an epoch, 4 epochs.
if [[ "$skipped" == 16 ]]; then
  ok "report: \"skipped_samples\": $skipped (4 bad files x 4 epochs)"
else
  fail "report: skipped_samples '$skipped', want 16: $(cat "$tmp/skip.json")"
fi

# Real photos: the CIFAR-10 subset (4,000 training and 1,000 test records)
# written as a folder of JPEGs and PNGs, zoo lenet_cifar on 32x32 crops.
# Skips without $COHORT_DATA_DIR (tools/test sets it to ../shared/data).
cifar="${COHORT_DATA_DIR:-}/cifar10-subset/cifar-10-batches-bin"
if [[ -z "${COHORT_DATA_DIR:-}" || ! -f "$cifar/data_batch_1.bin" ]]; then
  echo "SKIPPED (CIFAR-10 as an image folder): no CIFAR-10 under COHORT_DATA_DIR='${COHORT_DATA_DIR:-}'"
else
  "$make" --out="$tmp/cifar" --cifar_dir="$cifar" --format=mixed >/dev/null
  cat > "$tmp/cifar.textproto" <<SPEC
name: "cifar-folder"
model { zoo: "lenet_cifar" }
data {
  kind: IMAGE_FOLDER dir: "$tmp/cifar"
  image_folder { classes: 10 image_size: 32 resize: 32 scale_min: 0.5
                 mean: [0.4914, 0.4822, 0.4465] std: [0.247, 0.243, 0.261] }
  loader_threads: 2
}
batch_size: 32
epochs: 6
optimizer { lr: 0.01 momentum: 0.9 }
SPEC
  # 39.5% when written (chance: 10%; 4,000 training images only).
  expect_accuracy 30 "lenet_cifar on the CIFAR-10 subset as an image folder" \
    "$cohort" train --job="$tmp/cifar.textproto" --quiet
fi

finish
