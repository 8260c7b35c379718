// //bench:gpu_kernels under --config=nocuda: this build has no CUDA code to
// measure, so it says so and exits 0, as the real benchmark does on a
// machine without a GPU.
#include <cstdio>

int main() {
  std::printf(
      "SKIP: cohort was built without CUDA (--config=nocuda); build with the "
      "CUDA toolkit installed to measure the GPU kernels\n");
  return 0;
}
