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

// The factor clip_grad_norm_ multiplies the gradient by, given the pieces'
// sums of squares: min(1, max_norm / (norm + 1e-6)).
float ClipScale(const std::vector<double>& squares, double max_norm);

}  // namespace cohort

#endif  // COHORT_WORKER_OPTIM_GRAD_CLIP_H_
