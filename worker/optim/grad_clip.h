// Gradient clipping by global norm, as PyTorch's clip_grad_norm_ computes
// it: the norm in pieces (each replica's slice of the flat gradient adds its
// sum of squares), then one scale for all of it. Pure functions,
// thread-safe.
#ifndef COHORT_WORKER_OPTIM_GRAD_CLIP_H_
#define COHORT_WORKER_OPTIM_GRAD_CLIP_H_

#include <cstdint>
#include <vector>

namespace cohort {

// The sum of x[i]^2 over n floats, in double.
double SumOfSquares(const float* x, int64_t n);

// SumOfSquares taken piece by piece while a gradient is being written from
// the back, as backward writes it: each fixed chunk is summed as soon as it
// is final, while it is still in cache, and Total() adds the chunks in order,
// so it gives SumOfSquares's result bit for bit whichever ranges came in.
// Thread safety: none; one caller at a time (the chunks themselves run on
// the compute threads).
class ChunkSquares {
 public:
  // Starts over on x[0, n); x must stay alive until Total().
  void Start(const float* x, int64_t n);
  // Every element at index >= offset is final: sums the chunks wholly there
  // that are not summed yet, once there are several of them.
  void Final(int64_t offset);
  // Sums the remaining chunks; returns the total over all of x.
  double Total();

 private:
  static constexpr int64_t kChunksAtOnce = 8;
  // Sums chunks [first, pending_).
  void SumFrom(int64_t first);

  const float* x_ = nullptr;
  int64_t n_ = 0;
  int64_t pending_ = 0;  // chunks [0, pending_) are not summed yet
  std::vector<double> partial_;
};

// The factor clip_grad_norm_ multiplies the gradient by, given the pieces'
// sums of squares: min(1, max_norm / (norm + 1e-6)).
float ClipScale(const std::vector<double>& squares, double max_norm);

}  // namespace cohort

#endif  // COHORT_WORKER_OPTIM_GRAD_CLIP_H_
