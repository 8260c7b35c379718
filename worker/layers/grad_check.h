// Finite-difference gradient checks for layers, in double precision.
//
// The check drives one Layer<double>: loss = sum(Forward(x) * R) for a fixed
// random R, so dLoss/dOut = R. It compares Backward's input and parameter
// gradients with central differences (step 1e-6) over every element (or a
// random sample of `max_checks` elements of large tensors).
//
// Test-only; not thread-safe.
#ifndef COHORT_WORKER_LAYERS_GRAD_CHECK_H_
#define COHORT_WORKER_LAYERS_GRAD_CHECK_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/tensor.h"
#include "worker/layers/layer.h"
#include "worker/layers/param_store.h"

namespace cohort {

struct GradCheckOptions {
  double step = 1e-6;
  // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-5;
  double atol = 1e-7;
  int64_t max_checks = 400;  // per tensor
  uint64_t seed = 1;
  bool check_input = true;  // false for layers that give no dIn
};

// Configures `layer` for per-sample shape `in_shape`, builds and initializes
// its parameters, and checks its gradients on a batch of `batch` random
// inputs (laid out as the layer expects: `batch_shape`). Returns OK or a
// message naming the first mismatching tensor, index and both values.
absl::Status CheckLayerGradients(Layer<double>& layer, const Shape& in_shape,
                                 const Shape& batch_shape,
                                 const GradCheckOptions& options = {});

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_GRAD_CHECK_H_
