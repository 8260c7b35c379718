#include "kernels/update_rules.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "common/logging.h"
#include "kernels/parallel.h"

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

using Run = DecayRun;

RuleLayout LayoutOrWhole(const RuleLayout& layout, int64_t n) {
  if (!layout.segments.empty() || n == 0) return layout;
  return MakeRuleLayout({}, 0, n);
}

std::vector<Run> RunsOf(const RuleLayout& layout, int64_t n) {
  return DecayRuns(layout, n);
}

template <typename T>
class Sgd : public UpdateRule<T> {
 public:
  Sgd(const SgdOptions& options, int64_t n, const RuleLayout& layout)
      : n_(n),
        runs_(RunsOf(layout, n)),
        mu_(options.momentum),
        wd_(options.weight_decay),
        nesterov_(options.nesterov) {
    if (mu_ != 0) buffer_.Resize({n});
  }

  void Step(absl::Span<T> params, absl::Span<const T> grads,
            double lr) override {
    CHECK_EQ(static_cast<int64_t>(params.size()), n_);
    CHECK_EQ(static_cast<int64_t>(grads.size()), n_);
    for (const Run& r : runs_) {
      T* p = params.data() + r.begin;
      const T* g = grads.data() + r.begin;
      const int64_t len = r.end - r.begin;
      const T wd = r.decay ? wd_ : T{0};
      T* m = mu_ == 0 ? nullptr : buffer_.data() + r.begin;
      // Elementwise: the same result on any number of threads.
      ParallelRanges(len, kElementwiseGrain, [&](int64_t b, int64_t e) {
        if (mu_ == 0) {
          SgdPlain<T>(p + b, g + b, e - b, lr, wd);
        } else if (nesterov_) {
          SgdMomentum<T, true>(p + b, g + b, m + b, e - b, lr, wd, mu_);
        } else {
          SgdMomentum<T, false>(p + b, g + b, m + b, e - b, lr, wd, mu_);
        }
      });
    }
  }

  std::vector<BasicTensor<T>*> State() override {
    if (mu_ == 0) return {};
    return {&buffer_};
  }

 private:
  int64_t n_;
  std::vector<Run> runs_;
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
  Adam(const AdamOptions& options, int64_t n, const RuleLayout& layout)
      : n_(n),
        runs_(RunsOf(layout, n)),
        options_(options),
        no_decay_(options),
        m_(Shape{n}),
        v_(Shape{n}),
        step_(Shape{1}) {
    no_decay_.weight_decay = 0;
  }

  void Step(absl::Span<T> params, absl::Span<const T> grads,
            double lr) override {
    CHECK_EQ(static_cast<int64_t>(params.size()), n_);
    CHECK_EQ(static_cast<int64_t>(grads.size()), n_);
    step_[0] += 1;
    const double t = static_cast<double>(step_[0]);
    const AdamScalars<T> decay = MakeAdamScalars<T>(lr, t, options_);
    const AdamScalars<T> plain = MakeAdamScalars<T>(lr, t, no_decay_);
    for (const Run& r : runs_) {
      T* p = params.data() + r.begin;
      const T* g = grads.data() + r.begin;
      T* m = m_.data() + r.begin;
      T* v = v_.data() + r.begin;
      const AdamScalars<T>& s = r.decay ? decay : plain;
      ParallelRanges(r.end - r.begin, kElementwiseGrain,
                     [&](int64_t b, int64_t e) {
                       AdamKernel<T>(p + b, g + b, m + b, v + b, e - b, s);
                     });
    }
  }

  std::vector<BasicTensor<T>*> State() override { return {&m_, &v_, &step_}; }

 private:
  int64_t n_;
  std::vector<Run> runs_;
  // Kept in double: MakeAdamScalars computes the bias corrections in double
  // (as PyTorch does in Python) before rounding them to T.
  AdamOptions options_;
  AdamOptions no_decay_;  // for tensors excluded from weight decay
  BasicTensor<T> m_;
  BasicTensor<T> v_;
  BasicTensor<T> step_;
};

// torch.optim.RMSprop over one run, weight decay `wd` (0 for an excluded
// run). `b` (momentum buffer) is null without momentum, `a` (gradient
// average) null unless centered.
template <typename T>
void RmspropKernel(T* p, const T* g, T* sq, T* b, T* a, int64_t n, T lr, T wd,
                   T alpha, T eps, T mu) {
  const T one_minus_alpha = T{1} - alpha;
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i] + wd * p[i];
    sq[i] = sq[i] * alpha + one_minus_alpha * (gi * gi);
    T avg;
    if (a != nullptr) {
      a[i] = a[i] * alpha + one_minus_alpha * gi;
      avg = std::sqrt(sq[i] - a[i] * a[i]) + eps;
    } else {
      avg = std::sqrt(sq[i]) + eps;
    }
    if (b != nullptr) {
      b[i] = b[i] * mu + gi / avg;
      p[i] -= lr * b[i];
    } else {
      p[i] -= lr * (gi / avg);
    }
  }
}

template <typename T>
class Rmsprop : public UpdateRule<T> {
 public:
  Rmsprop(const RmspropOptions& options, int64_t n, const RuleLayout& layout)
      : n_(n),
        runs_(RunsOf(layout, n)),
        alpha_(options.alpha),
        eps_(options.eps),
        wd_(options.weight_decay),
        mu_(options.momentum),
        square_avg_(Shape{n}) {
    if (options.momentum > 0) buffer_.Resize({n});
    if (options.centered) grad_avg_.Resize({n});
  }

  void Step(absl::Span<T> params, absl::Span<const T> grads,
            double lr) override {
    CHECK_EQ(static_cast<int64_t>(params.size()), n_);
    CHECK_EQ(static_cast<int64_t>(grads.size()), n_);
    for (const Run& r : runs_) {
      T* b = buffer_.size() > 0 ? buffer_.data() + r.begin : nullptr;
      T* a = grad_avg_.size() > 0 ? grad_avg_.data() + r.begin : nullptr;
      RmspropKernel<T>(params.data() + r.begin, grads.data() + r.begin,
                       square_avg_.data() + r.begin, b, a, r.end - r.begin,
                       static_cast<T>(lr), r.decay ? wd_ : T{0}, alpha_, eps_,
                       mu_);
    }
  }

  std::vector<BasicTensor<T>*> State() override {
    std::vector<BasicTensor<T>*> state = {&square_avg_};
    if (buffer_.size() > 0) state.push_back(&buffer_);
    if (grad_avg_.size() > 0) state.push_back(&grad_avg_);
    return state;
  }

 private:
  int64_t n_;
  std::vector<Run> runs_;
  T alpha_;
  T eps_;
  T wd_;
  T mu_;
  BasicTensor<T> square_avg_;
  BasicTensor<T> buffer_;    // empty without momentum
  BasicTensor<T> grad_avg_;  // empty unless centered
};

// torch.optim.Adagrad over one run at this step's rate `clr`, weight decay
// `wd` (0 for an excluded run).
template <typename T>
void AdagradKernel(T* p, const T* g, T* sum, int64_t n, T clr, T wd, T eps) {
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i] + wd * p[i];
    sum[i] += gi * gi;
    p[i] -= clr * (gi / (std::sqrt(sum[i]) + eps));
  }
}

template <typename T>
class Adagrad : public UpdateRule<T> {
 public:
  Adagrad(const AdagradOptions& options, int64_t n, const RuleLayout& layout)
      : n_(n),
        runs_(RunsOf(layout, n)),
        options_(options),
        sum_(Shape{n}),
        step_(Shape{1}) {
    std::fill(sum_.data(), sum_.data() + n,
              static_cast<T>(options.initial_accumulator_value));
  }

  void Step(absl::Span<T> params, absl::Span<const T> grads,
            double lr) override {
    CHECK_EQ(static_cast<int64_t>(params.size()), n_);
    CHECK_EQ(static_cast<int64_t>(grads.size()), n_);
    step_[0] += 1;
    // In double, as PyTorch computes it in Python, then rounded once.
    const T clr = static_cast<T>(
        lr / (1 + (static_cast<double>(step_[0]) - 1) * options_.lr_decay));
    const T wd = static_cast<T>(options_.weight_decay);
    const T eps = static_cast<T>(options_.eps);
    for (const Run& r : runs_) {
      T* p = params.data() + r.begin;
      const T* g = grads.data() + r.begin;
      T* s = sum_.data() + r.begin;
      const T run_wd = r.decay ? wd : T{0};
      ParallelRanges(
          r.end - r.begin, kElementwiseGrain, [&](int64_t b, int64_t e) {
            AdagradKernel<T>(p + b, g + b, s + b, e - b, clr, run_wd, eps);
          });
    }
  }

  std::vector<BasicTensor<T>*> State() override { return {&sum_, &step_}; }

 private:
  int64_t n_;
  std::vector<Run> runs_;
  AdagradOptions options_;
  BasicTensor<T> sum_;
  BasicTensor<T> step_;
};

// Sum of x[i] * y[i] over one piece, in double, always from the piece's
// first element: four running sums the compiler can keep in flight.
template <typename T>
double DotOfPiece(const T* x, const T* y, int64_t n) {
  double acc[4] = {};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int k = 0; k < 4; ++k) {
      acc[k] += static_cast<double>(x[i + k]) * static_cast<double>(y[i + k]);
    }
  }
  for (; i < n; ++i) acc[0] += static_cast<double>(x[i]) * y[i];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

// The two passes of LAMB and LARS, and Step from them over the rule's own
// elements. Two sums per piece.
template <typename T>
class NormRule : public UpdateRule<T> {
 public:
  NormRule(int64_t n, const RuleLayout& layout)
      : n_(n),
        layout_(LayoutOrWhole(layout, n)),
        sums_(2 * layout_.num_pieces),
        totals_(2 * layout_.num_tensors) {}

  int SumsPerPiece() const override { return 2; }

  void Step(absl::Span<T> params, absl::Span<const T> grads,
            double lr) override {
    this->BeginStep(params, grads, sums_.data());
    std::fill(totals_.begin(), totals_.end(), 0.0);
    for (const Segment& s : layout_.segments) {
      for (int j = 0; j < 2; ++j) {
        totals_[2 * s.tensor + j] += sums_[2 * s.piece + j];
      }
    }
    this->FinishStep(params, grads, lr, totals_.data());
  }

 protected:
  void CheckSizes(size_t params, size_t grads) const {
    CHECK_EQ(static_cast<int64_t>(params), n_);
    CHECK_EQ(static_cast<int64_t>(grads), n_);
  }

  int64_t n_;
  RuleLayout layout_;

 private:
  std::vector<double> sums_;    // Step's per-piece sums
  std::vector<double> totals_;  // Step's per-tensor totals
};

template <typename T>
class Lamb : public NormRule<T> {
 public:
  Lamb(const LambOptions& options, int64_t n, const RuleLayout& layout)
      : NormRule<T>(n, layout),
        options_(options),
        m_(Shape{n}),
        v_(Shape{n}),
        step_(Shape{1}),
        u_(Shape{std::min<int64_t>(n, kNormBlock)}) {}

  void BeginStep(absl::Span<const T> params, absl::Span<const T> grads,
                 double* sums) override {
    this->CheckSizes(params.size(), grads.size());
    step_[0] += 1;
    const double t = static_cast<double>(step_[0]);
    // Bias corrections in double (as in Adam), then rounded.
    inv_bc1_ = static_cast<T>(1.0 / (1.0 - std::pow(options_.beta1, t)));
    bc2_sqrt_ = static_cast<T>(std::sqrt(1.0 - std::pow(options_.beta2, t)));
    const T b1 = options_.beta1, b2 = options_.beta2;
    const T omb1 = 1.0 - options_.beta1, omb2 = 1.0 - options_.beta2;
    for (const Segment& s : this->layout_.segments) {
      const T* p = params.data() + s.begin;
      const T* g = grads.data() + s.begin;
      T* m = m_.data() + s.begin;
      T* v = v_.data() + s.begin;
      const int64_t len = s.end - s.begin;
      for (int64_t i = 0; i < len; ++i) {
        m[i] = b1 * m[i] + omb1 * g[i];
        v[i] = b2 * v[i] + omb2 * (g[i] * g[i]);
      }
      Update(p, m, v, len, s.decay, u_.data());
      sums[2 * s.piece] = DotOfPiece(p, p, len);
      sums[2 * s.piece + 1] = DotOfPiece(u_.data(), u_.data(), len);
    }
  }

  void FinishStep(absl::Span<T> params, absl::Span<const T> grads, double lr,
                  const double* totals) override {
    this->CheckSizes(params.size(), grads.size());
    for (const Segment& s : this->layout_.segments) {
      const double p2 = totals[2 * s.tensor], u2 = totals[2 * s.tensor + 1];
      const T step = static_cast<T>(
          lr * TrustRatio(std::sqrt(p2), std::sqrt(u2), p2 == 0 || u2 == 0));
      T* p = params.data() + s.begin;
      const int64_t len = s.end - s.begin;
      Update(p, m_.data() + s.begin, v_.data() + s.begin, len, s.decay,
             u_.data());
      for (int64_t i = 0; i < len; ++i) p[i] -= step * u_[i];
    }
  }

  std::vector<BasicTensor<T>*> State() override { return {&m_, &v_, &step_}; }

 private:
  // u = (m / bc1) / (sqrt(v) / sqrt(bc2) + eps) + wd p, into `u` (one piece
  // at most: kNormBlock elements).
  void Update(const T* p, const T* m, const T* v, int64_t n, bool decay,
              T* u) const {
    const T wd = decay ? static_cast<T>(options_.weight_decay) : T{0};
    const T eps = options_.eps;
    for (int64_t i = 0; i < n; ++i) {
      u[i] =
          (m[i] * inv_bc1_) / (std::sqrt(v[i]) / bc2_sqrt_ + eps) + wd * p[i];
    }
  }

  LambOptions options_;
  BasicTensor<T> m_;
  BasicTensor<T> v_;
  BasicTensor<T> step_;
  BasicTensor<T> u_;  // one piece's update, scratch
  T inv_bc1_ = 1;     // this step's 1 / (1 - beta1^t)
  T bc2_sqrt_ = 1;    // this step's sqrt(1 - beta2^t)
};

template <typename T>
class Lars : public NormRule<T> {
 public:
  Lars(const LarsOptions& options, int64_t n, const RuleLayout& layout)
      : NormRule<T>(n, layout), options_(options) {
    if (options.momentum != 0) buffer_.Resize({n});
  }

  void BeginStep(absl::Span<const T> params, absl::Span<const T> grads,
                 double* sums) override {
    this->CheckSizes(params.size(), grads.size());
    for (const Segment& s : this->layout_.segments) {
      const T* p = params.data() + s.begin;
      const T* g = grads.data() + s.begin;
      sums[2 * s.piece] = DotOfPiece(p, p, s.end - s.begin);
      sums[2 * s.piece + 1] = DotOfPiece(g, g, s.end - s.begin);
    }
  }

  void FinishStep(absl::Span<T> params, absl::Span<const T> grads, double lr,
                  const double* totals) override {
    this->CheckSizes(params.size(), grads.size());
    const T mu = options_.momentum;
    const T rate = static_cast<T>(lr);
    for (const Segment& s : this->layout_.segments) {
      const double wd = s.decay ? options_.weight_decay : 0.0;
      const double pn = std::sqrt(totals[2 * s.tensor]);
      const double gn = std::sqrt(totals[2 * s.tensor + 1]);
      const T local = static_cast<T>(TrustRatio(
          options_.trust_coefficient * pn, gn + wd * pn, pn == 0 || gn == 0));
      const T wdt = static_cast<T>(wd);
      T* p = params.data() + s.begin;
      const T* g = grads.data() + s.begin;
      const int64_t len = s.end - s.begin;
      if (buffer_.size() == 0) {
        for (int64_t i = 0; i < len; ++i) {
          p[i] -= rate * (local * (g[i] + wdt * p[i]));
        }
        continue;
      }
      T* b = buffer_.data() + s.begin;
      for (int64_t i = 0; i < len; ++i) {
        b[i] = mu * b[i] + local * (g[i] + wdt * p[i]);
        p[i] -= rate * b[i];
      }
    }
  }

  std::vector<BasicTensor<T>*> State() override {
    if (buffer_.size() == 0) return {};
    return {&buffer_};
  }

 private:
  LarsOptions options_;
  BasicTensor<T> buffer_;  // empty without momentum
};

}  // namespace

RuleLayout MakeRuleLayout(const std::vector<ParamTensor>& tensors,
                          int64_t begin, int64_t end) {
  const std::vector<ParamTensor> whole = {{begin, end, true}};
  const std::vector<ParamTensor>& ts = tensors.empty() ? whole : tensors;
  RuleLayout out;
  int64_t piece = 0;
  for (size_t t = 0; t < ts.size(); ++t) {
    for (int64_t a = ts[t].begin; a < ts[t].end;) {
      const int64_t b = std::min(ts[t].end, (a / kNormBlock + 1) * kNormBlock);
      if (b > begin && a < end) {
        Segment s;
        s.begin = std::max(a, begin) - begin;
        s.end = std::min(b, end) - begin;
        s.tensor = static_cast<int32_t>(t);
        s.piece = piece;
        s.decay = ts[t].decay;
        out.segments.push_back(s);
      }
      ++piece;
      a = b;
    }
  }
  out.num_pieces = piece;
  out.num_tensors = static_cast<int32_t>(ts.size());
  return out;
}

std::vector<ParamTensor> ParamTensorsOf(
    const std::vector<int64_t>& padded_sizes,
    const std::vector<bool>& no_decay) {
  CHECK(no_decay.empty() || no_decay.size() == padded_sizes.size());
  std::vector<ParamTensor> tensors;
  int64_t at = 0;
  for (size_t i = 0; i < padded_sizes.size(); ++i) {
    tensors.push_back(
        {at, at + padded_sizes[i], no_decay.empty() || !no_decay[i]});
    at += padded_sizes[i];
  }
  return tensors;
}

std::vector<DecayRun> DecayRuns(const RuleLayout& layout, int64_t n) {
  std::vector<DecayRun> runs;
  for (const Segment& s : LayoutOrWhole(layout, n).segments) {
    CHECK(s.begin >= 0 && s.begin <= s.end && s.end <= n)
        << "segment [" << s.begin << ", " << s.end << ") outside " << n;
    if (!runs.empty() && runs.back().end == s.begin &&
        runs.back().decay == s.decay) {
      runs.back().end = s.end;
    } else {
      runs.push_back({s.begin, s.end, s.decay});
    }
  }
  return runs;
}

void FoldPieceSums(const RuleLayout& whole, int k, const double* piece_sums,
                   double* totals) {
  std::fill(totals, totals + int64_t{whole.num_tensors} * k, 0.0);
  for (const Segment& s : whole.segments) {
    for (int j = 0; j < k; ++j)
      totals[s.tensor * k + j] += piece_sums[s.piece * k + j];
  }
}

template <typename T>
std::unique_ptr<UpdateRule<T>> MakeSgdRule(const SgdOptions& options,
                                           int64_t num_elements,
                                           const RuleLayout& layout) {
  CHECK_GE(num_elements, 0);
  return std::make_unique<Sgd<T>>(options, num_elements, layout);
}

template <typename T>
std::unique_ptr<UpdateRule<T>> MakeAdamRule(const AdamOptions& options,
                                            int64_t num_elements,
                                            const RuleLayout& layout) {
  CHECK_GE(num_elements, 0);
  return std::make_unique<Adam<T>>(options, num_elements, layout);
}

template <typename T>
std::unique_ptr<UpdateRule<T>> MakeRmspropRule(const RmspropOptions& options,
                                               int64_t num_elements,
                                               const RuleLayout& layout) {
  CHECK_GE(num_elements, 0);
  return std::make_unique<Rmsprop<T>>(options, num_elements, layout);
}

template <typename T>
std::unique_ptr<UpdateRule<T>> MakeAdagradRule(const AdagradOptions& options,
                                               int64_t num_elements,
                                               const RuleLayout& layout) {
  CHECK_GE(num_elements, 0);
  return std::make_unique<Adagrad<T>>(options, num_elements, layout);
}

template <typename T>
std::unique_ptr<UpdateRule<T>> MakeLambRule(const LambOptions& options,
                                            int64_t num_elements,
                                            const RuleLayout& layout) {
  CHECK_GE(num_elements, 0);
  return std::make_unique<Lamb<T>>(options, num_elements, layout);
}

template <typename T>
std::unique_ptr<UpdateRule<T>> MakeLarsRule(const LarsOptions& options,
                                            int64_t num_elements,
                                            const RuleLayout& layout) {
  CHECK_GE(num_elements, 0);
  return std::make_unique<Lars<T>>(options, num_elements, layout);
}

template <typename T>
std::unique_ptr<UpdateRule<T>> MakeUpdateRule(const RuleOptions& options,
                                              int64_t num_elements,
                                              const RuleLayout& layout) {
  switch (options.kind) {
    case RuleKind::kAdam:
      return MakeAdamRule<T>(options.adam, num_elements, layout);
    case RuleKind::kRmsprop:
      return MakeRmspropRule<T>(options.rmsprop, num_elements, layout);
    case RuleKind::kLamb:
      return MakeLambRule<T>(options.lamb, num_elements, layout);
    case RuleKind::kLars:
      return MakeLarsRule<T>(options.lars, num_elements, layout);
    case RuleKind::kAdagrad:
      return MakeAdagradRule<T>(options.adagrad, num_elements, layout);
    case RuleKind::kSgd:
      break;
  }
  return MakeSgdRule<T>(options.sgd, num_elements, layout);
}

#define COHORT_DEFINE_RULE(Make, Options, T)                               \
  template std::unique_ptr<UpdateRule<T>> Make<T>(const Options&, int64_t, \
                                                  const RuleLayout&);
#define COHORT_DEFINE_RULES(T)                           \
  COHORT_DEFINE_RULE(MakeSgdRule, SgdOptions, T)         \
  COHORT_DEFINE_RULE(MakeAdamRule, AdamOptions, T)       \
  COHORT_DEFINE_RULE(MakeRmspropRule, RmspropOptions, T) \
  COHORT_DEFINE_RULE(MakeAdagradRule, AdagradOptions, T) \
  COHORT_DEFINE_RULE(MakeLambRule, LambOptions, T)       \
  COHORT_DEFINE_RULE(MakeLarsRule, LarsOptions, T)       \
  COHORT_DEFINE_RULE(MakeUpdateRule, RuleOptions, T)
COHORT_DEFINE_RULES(float)
COHORT_DEFINE_RULES(double)

}  // namespace cohort
