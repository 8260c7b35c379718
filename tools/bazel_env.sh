# Sourced by tools/demo, tools/test and tools/bench: one place for the Bazel
# flags every script shares.
#   COHORT_NO_CUDA=1     build without the CUDA toolkit (also chosen
#                        automatically when /usr/local/cuda/bin/nvcc is absent)
#   COHORT_DISK_CACHE    Bazel's shared disk cache (default ~/.cache/cohort-bazel)
cohort_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bazel_flags=(--disk_cache="${COHORT_DISK_CACHE:-$HOME/.cache/cohort-bazel}")
if [[ "${COHORT_NO_CUDA:-0}" == 1 || ! -x /usr/local/cuda/bin/nvcc ]]; then
  bazel_flags+=(--config=nocuda)
fi
