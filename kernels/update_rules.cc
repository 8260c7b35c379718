#include "kernels/update_rules.h"

#include <immintrin.h>

#include <cmath>
#include <type_traits>

#include "common/logging.h"

namespace cohort {
namespace {

// Lanes of one AVX2 register of floats; the float kernels run whole vectors
// and leave the tail (< 8 elements) to the generic loop.
constexpr int64_t kLanes = 8;

template <typename T>
int64_t VectorEnd(int64_t n) {
  if constexpr (std::is_same_v<T, float>) return n - n % kLanes;
  return 0;
}

// SGD without momentum: p -= lr * (g + wd * p).
template <typename T>
void SgdPlain(T* p, const T* g, int64_t n, T lr, T wd) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float>) {
    const __m256 vlr = _mm256_set1_ps(lr), vwd = _mm256_set1_ps(wd);
    for (; i < VectorEnd<T>(n); i += kLanes) {
      __m256 vp = _mm256_loadu_ps(p + i);
      __m256 vg = _mm256_fmadd_ps(vwd, vp, _mm256_loadu_ps(g + i));
      _mm256_storeu_ps(p + i, _mm256_fnmadd_ps(vlr, vg, vp));
    }
  }
  for (; i < n; ++i) p[i] -= lr * (g[i] + wd * p[i]);
}

// SGD with momentum `mu` and buffer `b`; Nesterov as a template argument so
// that each loop body is branch-free.
template <typename T, bool kNesterov>
void SgdMomentum(T* p, const T* g, T* b, int64_t n, T lr, T wd, T mu) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float>) {
    const __m256 vlr = _mm256_set1_ps(lr), vwd = _mm256_set1_ps(wd),
                 vmu = _mm256_set1_ps(mu);
    for (; i < VectorEnd<T>(n); i += kLanes) {
      __m256 vp = _mm256_loadu_ps(p + i);
      __m256 vg = _mm256_fmadd_ps(vwd, vp, _mm256_loadu_ps(g + i));
      __m256 vb = _mm256_fmadd_ps(vmu, _mm256_loadu_ps(b + i), vg);
      _mm256_storeu_ps(b + i, vb);
      __m256 vd = kNesterov ? _mm256_fmadd_ps(vmu, vb, vg) : vb;
      _mm256_storeu_ps(p + i, _mm256_fnmadd_ps(vlr, vd, vp));
    }
  }
  for (; i < n; ++i) {
    T gi = g[i] + wd * p[i];
    b[i] = mu * b[i] + gi;
    p[i] -= lr * (kNesterov ? gi + mu * b[i] : b[i]);
  }
}

template <typename T>
class Sgd : public UpdateRule<T> {
 public:
  Sgd(const SgdOptions& options, int64_t n)
      : n_(n),
        mu_(options.momentum),
        wd_(options.weight_decay),
        nesterov_(options.nesterov) {
    if (mu_ != 0) buffer_.Resize({n});
  }

  void Step(absl::Span<T> params, absl::Span<const T> grads,
            double lr) override {
    CHECK_EQ(static_cast<int64_t>(params.size()), n_);
    CHECK_EQ(static_cast<int64_t>(grads.size()), n_);
    T* p = params.data();
    const T* g = grads.data();
    if (mu_ == 0) {
      SgdPlain<T>(p, g, n_, lr, wd_);
    } else if (nesterov_) {
      SgdMomentum<T, true>(p, g, buffer_.data(), n_, lr, wd_, mu_);
    } else {
      SgdMomentum<T, false>(p, g, buffer_.data(), n_, lr, wd_, mu_);
    }
  }

  std::vector<BasicTensor<T>*> State() override {
    if (mu_ == 0) return {};
    return {&buffer_};
  }

 private:
  int64_t n_;
  T mu_;
  T wd_;
  bool nesterov_;
  BasicTensor<T> buffer_;  // empty without momentum
};

template <typename T>
void AdamKernel(T* p, const T* g, T* m, T* v, int64_t n,
                const AdamScalars<T>& s) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float>) {
    const __m256 decay = _mm256_set1_ps(s.decay), l2 = _mm256_set1_ps(s.l2),
                 beta2 = _mm256_set1_ps(s.beta2),
                 lerp1 = _mm256_set1_ps(s.lerp1),
                 omb2 = _mm256_set1_ps(s.one_minus_beta2),
                 bc2 = _mm256_set1_ps(s.bc2_sqrt), eps = _mm256_set1_ps(s.eps),
                 step = _mm256_set1_ps(s.step_size);
    for (; i < VectorEnd<T>(n); i += kLanes) {
      __m256 vp = _mm256_loadu_ps(p + i);
      __m256 vg = _mm256_fmadd_ps(l2, vp, _mm256_loadu_ps(g + i));
      __m256 vm = _mm256_loadu_ps(m + i);
      vm = _mm256_fmadd_ps(lerp1, _mm256_sub_ps(vg, vm), vm);
      __m256 vv = _mm256_mul_ps(beta2, _mm256_loadu_ps(v + i));
      vv = _mm256_fmadd_ps(omb2, _mm256_mul_ps(vg, vg), vv);
      _mm256_storeu_ps(m + i, vm);
      _mm256_storeu_ps(v + i, vv);
      __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vv), bc2), eps);
      vp = _mm256_fnmadd_ps(step, _mm256_div_ps(vm, denom),
                            _mm256_mul_ps(vp, decay));
      _mm256_storeu_ps(p + i, vp);
    }
  }
  for (; i < n; ++i) {
    T gi = g[i] + s.l2 * p[i];
    m[i] += s.lerp1 * (gi - m[i]);
    v[i] = s.beta2 * v[i] + s.one_minus_beta2 * (gi * gi);
    T denom = std::sqrt(v[i]) / s.bc2_sqrt + s.eps;
    p[i] = p[i] * s.decay - s.step_size * (m[i] / denom);
  }
}

template <typename T>
class Adam : public UpdateRule<T> {
 public:
  Adam(const AdamOptions& options, int64_t n)
      : n_(n), options_(options), m_(Shape{n}), v_(Shape{n}), step_(Shape{1}) {}

  void Step(absl::Span<T> params, absl::Span<const T> grads,
            double lr) override {
    CHECK_EQ(static_cast<int64_t>(params.size()), n_);
    CHECK_EQ(static_cast<int64_t>(grads.size()), n_);
    step_[0] += 1;
    const AdamScalars<T> s =
        MakeAdamScalars<T>(lr, static_cast<double>(step_[0]), options_);
    AdamKernel<T>(params.data(), grads.data(), m_.data(), v_.data(), n_, s);
  }

  std::vector<BasicTensor<T>*> State() override { return {&m_, &v_, &step_}; }

 private:
  int64_t n_;
  // Kept in double: MakeAdamScalars computes the bias corrections in double
  // (as PyTorch does in Python) before rounding them to T.
  AdamOptions options_;
  BasicTensor<T> m_;
  BasicTensor<T> v_;
  BasicTensor<T> step_;
};

}  // namespace

template <typename T>
std::unique_ptr<UpdateRule<T>> MakeSgdRule(const SgdOptions& options,
                                           int64_t num_elements) {
  CHECK_GE(num_elements, 0);
  return std::make_unique<Sgd<T>>(options, num_elements);
}

template <typename T>
std::unique_ptr<UpdateRule<T>> MakeAdamRule(const AdamOptions& options,
                                            int64_t num_elements) {
  CHECK_GE(num_elements, 0);
  return std::make_unique<Adam<T>>(options, num_elements);
}

template std::unique_ptr<UpdateRule<float>> MakeSgdRule<float>(
    const SgdOptions&, int64_t);
template std::unique_ptr<UpdateRule<double>> MakeSgdRule<double>(
    const SgdOptions&, int64_t);
template std::unique_ptr<UpdateRule<float>> MakeAdamRule<float>(
    const AdamOptions&, int64_t);
template std::unique_ptr<UpdateRule<double>> MakeAdamRule<double>(
    const AdamOptions&, int64_t);

}  // namespace cohort
