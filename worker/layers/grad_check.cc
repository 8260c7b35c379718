#include "worker/layers/grad_check.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

double Loss(Layer<double>& layer, const TensorD& x, const TensorD& r,
            TensorD* out) {
  layer.Forward(x, out, Mode::kTrain);
  double s = 0;
  for (int64_t i = 0; i < out->size(); ++i) s += (*out)[i] * r[i];
  return s;
}

std::vector<int64_t> Sample(int64_t n, int64_t max_checks, Rng& rng) {
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) idx[i] = i;
  if (n > max_checks) {
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(max_checks);
  }
  return idx;
}

// Compares analytic gradient `g` of the values in `v` with central
// differences of the loss. Layers with randomness (dropout) must reseed
// identically per evaluation, which SeedRandom before each Forward does.
absl::Status CompareTensor(const std::string& what, Layer<double>& layer,
                           const TensorD& x, const TensorD& r, double* v,
                           const double* g, int64_t n,
                           const GradCheckOptions& o, Rng& rng) {
  TensorD out;
  for (int64_t i : Sample(n, o.max_checks, rng)) {
    const double saved = v[i];
    v[i] = saved + o.step;
    layer.SeedRandom(o.seed);
    const double lp = Loss(layer, x, r, &out);
    v[i] = saved - o.step;
    layer.SeedRandom(o.seed);
    const double lm = Loss(layer, x, r, &out);
    v[i] = saved;
    const double numeric = (lp - lm) / (2 * o.step);
    if (std::abs(g[i] - numeric) > o.atol + o.rtol * std::abs(numeric)) {
      return absl::InternalError(
          absl::StrCat(layer.Name(), ": gradient of ", what, "[", i, "] is ",
                       g[i], " but finite differences give ", numeric));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckLayerGradients(Layer<double>& layer, const Shape& in_shape,
                                 const Shape& batch_shape,
                                 const GradCheckOptions& o) {
  ASSIGN_OR_RETURN(Shape out_shape, layer.Configure(in_shape));
  (void)out_shape;
  ParamStore<double> store;
  Layer<double>* layers[] = {&layer};
  store.Build(layers);
  Rng rng(o.seed);
  store.Initialize(rng);
  // Random parameters, so that zero-initialised biases and unit BatchNorm
  // scales do not hide mistakes.
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t i = 0; i < store.values().size(); ++i) {
    store.values()[i] += 0.1 * normal(rng);
  }
  TensorD x(batch_shape);
  for (int64_t i = 0; i < x.size(); ++i) x[i] = normal(rng);
  TensorD out;
  layer.SeedRandom(o.seed);
  layer.Forward(x, &out, Mode::kTrain);
  TensorD r(out.shape());
  for (int64_t i = 0; i < r.size(); ++i) r[i] = normal(rng);
  TensorD grad_in;
  layer.Backward(r, o.check_input ? &grad_in : nullptr);
  TensorD param_grads = store.grads().Clone();
  if (o.check_input) {
    if (grad_in.size() != x.size()) {
      return absl::InternalError(absl::StrCat(
          layer.Name(), ": input gradient has shape ",
          ShapeString(grad_in.shape()), ", input ", ShapeString(x.shape())));
    }
    RETURN_IF_ERROR(CompareTensor("input", layer, x, r, x.data(),
                                  grad_in.data(), x.size(), o, rng));
  }
  for (const auto& e : store.entries()) {
    RETURN_IF_ERROR(CompareTensor(
        e.name, layer, x, r, store.values().data() + e.offset,
        param_grads.data() + e.offset, NumElements(e.shape), o, rng));
  }
  return absl::OkStatus();
}

}  // namespace cohort
