#include "worker/layers/norm.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"
#include "kernels/norm_rows.h"
#include "kernels/parallel.h"

namespace cohort {
template <typename T>
std::string NormBase<T>::Name() const {
  if (options_.per_position) {
    return absl::StrCat(kind_, "(per position, ", channels_, ")");
  }
  if (per_element_) return absl::StrCat(kind_, ShapeString(in_shape_));
  return absl::StrCat(kind_, "(", options_.groups, ", ", channels_, ")");
}

template <typename T>
absl::StatusOr<Shape> NormBase<T>::Configure(const Shape& in) {
  auto error = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(kind_, ": ", parts...));
  };
  if (!(options_.eps > 0.0) || !std::isfinite(options_.eps)) {
    return error("eps must be a positive number, got ", options_.eps);
  }
  if (in.empty() || in.size() > 3 || NumElements(in) == 0) {
    return error(
        "expected a non-empty per-sample input [F], [C, L] or "
        "[C, H, W], got ",
        ShapeString(in));
  }
  if (options_.per_position) {
    if (!per_element_ || in.size() != 2) {
      return error("per_position expects a per-sample sequence [C, L], got ",
                   ShapeString(in));
    }
    in_shape_ = in;
    dense_ = false;
    channels_ = in[0];
    inner_ = in[1];
    return in;
  }
  in_shape_ = in;
  dense_ = in.size() == 1;
  if (per_element_) {
    // All features are one group; as one "channel" of P positions the
    // weight index c * P + p is then PyTorch's flat feature index.
    channels_ = dense_ ? 1 : in[0];
    inner_ = NumElements(in) / channels_;
  } else {
    channels_ = in[0];
    inner_ = NumElements(in) / channels_;
  }
  const int64_t groups = per_element_ ? 1 : options_.groups;
  if (groups < 1 || (!per_element_ && channels_ % groups != 0)) {
    return error("groups (", groups, ") must divide the channels (", channels_,
                 ") of ", ShapeString(in));
  }
  return in;
}

template <typename T>
std::vector<ParamDecl> NormBase<T>::Params() const {
  if (!options_.affine) return {};
  const Shape shape =
      per_element_ && !options_.per_position ? in_shape_ : Shape{channels_};
  return {{"weight", shape, ParamDecl::Init::kOnes},
          {"bias", shape, ParamDecl::Init::kZeros}};
}

template <typename T>
void NormBase<T>::Bind(std::vector<BasicTensor<T>> values,
                       std::vector<BasicTensor<T>> grads) {
  if (!options_.affine) return;
  CHECK(values.size() == 2 && grads.size() == 2) << Name() << ": Bind";
  weight_ = std::move(values[0]);
  bias_ = std::move(values[1]);
  weight_grad_ = std::move(grads[0]);
  bias_grad_ = std::move(grads[1]);
}

template <typename T>
void NormBase<T>::Strides(int64_t n, int64_t* c_stride,
                          int64_t* n_stride) const {
  if (per_element_ && dense_) {  // {N, F}: one channel of F
    *c_stride = 0;
    *n_stride = inner_;
  } else if (dense_) {  // GroupNorm on {N, F}: F channels of one position
    *c_stride = 1;
    *n_stride = channels_;
  } else {  // {C, N, P}
    *c_stride = n * inner_;
    *n_stride = inner_;
  }
}

template <typename T>
void NormBase<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                          Mode mode) {
  const int64_t per_sample = channels_ * inner_;
  const int64_t n = dense_ ? in.dim(0) : in.rank() >= 2 ? in.dim(1) : 0;
  CHECK(in.rank() == static_cast<int64_t>(in_shape_.size()) + 1 &&
        in.size() == n * per_sample)
      << Name() << ": input " << ShapeString(in.shape())
      << " does not match the configured per-sample shape";
  in_ = &in;
  EnsureShape(out, in.shape());
  if (options_.per_position) return ForwardPerPosition(in, out);
  int64_t cs, ns;
  Strides(n, &cs, &ns);
  const int64_t groups = per_element_ ? 1 : options_.groups;
  const int64_t cg = channels_ / groups;
  const double m = static_cast<double>(cg * inner_);
  mean_.resize(n * groups);
  invstd_.resize(n * groups);
  const T* x = in.data();
  T* y = out->data();
  // Each (sample, group) writes its own statistics and rows: split over
  // the compute team, any thread count gives the bits of one.
  ParallelItems(
      n * groups, ItemGrain(cg * inner_), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const int64_t s = i / groups, g = i % groups;
          const GroupRows rows{x + s * ns, nullptr,      y + s * ns, cs,
                               g * cg,     (g + 1) * cg, 0.0,        0.0};
          GroupStats(rows, m, &mean_[i], &invstd_[i]);
          NormalizeGroup(rows, static_cast<T>(mean_[i]),
                         static_cast<T>(invstd_[i]));
        }
      });
}

// Rows of adjacent channels (a dense GroupNorm's channels, one element
// each) are one row to the sums.
template <typename T>
void NormBase<T>::GroupStats(const GroupRows& rows, double m, double* mean,
                             double* invstd) const {
  const int64_t p_count = inner_;
  const bool adjacent = rows.c_stride == p_count;
  const int64_t len =
      adjacent ? (rows.c_end - rows.c_begin) * p_count : p_count;
  const int64_t c_end = adjacent ? rows.c_begin + 1 : rows.c_end;
  double sum = 0;
  for (int64_t c = rows.c_begin; c < c_end; ++c) {
    sum += RowSum(rows.x + c * rows.c_stride, len);
  }
  *mean = sum / m;
  double var = 0;
  for (int64_t c = rows.c_begin; c < c_end; ++c) {
    var += RowSquaredDeviations(rows.x + c * rows.c_stride, len, *mean);
  }
  *invstd = 1.0 / std::sqrt(var / m + options_.eps);
}

// y = (x - mean) * invstd, then the affine map, over one (sample, group);
// rows.dx is y.
template <typename T>
void NormBase<T>::NormalizeGroup(const GroupRows& rows, T tm, T ti) const {
  const int64_t p_count = inner_;
  const bool affine = options_.affine;
  if (affine && !per_element_ && p_count == 1) {  // one element a channel
    for (int64_t c = rows.c_begin; c < rows.c_end; ++c) {
      const int64_t o = c * rows.c_stride;
      rows.dx[o] = (rows.x[o] - tm) * ti * weight_[c] + bias_[c];
    }
    return;
  }
  for (int64_t c = rows.c_begin; c < rows.c_end; ++c) {
    const T* r = rows.x + c * rows.c_stride;
    T* o = rows.dx + c * rows.c_stride;
    if (!affine) {
      for (int64_t p = 0; p < p_count; ++p) o[p] = (r[p] - tm) * ti;
    } else if (per_element_) {
      const T* w = weight_.data() + c * p_count;
      const T* b = bias_.data() + c * p_count;
      for (int64_t p = 0; p < p_count; ++p) {
        o[p] = (r[p] - tm) * ti * w[p] + b[p];
      }
    } else {
      const T w = weight_[c], b = bias_[c];
      for (int64_t p = 0; p < p_count; ++p) {
        o[p] = (r[p] - tm) * ti * w + b;
      }
    }
  }
}

// With xh = (x - mean) * invstd and gy = dy * weight, per (sample, group)
// over its M elements:
//   dx = invstd * (gy - mean(gy) - xh * mean(gy * xh))
//   dweight = sum over samples of dy * xh, dbias = sum of dy.
template <typename T>
void NormBase<T>::Backward(const BasicTensor<T>& grad_out,
                           BasicTensor<T>* grad_in) {
  CHECK(in_ != nullptr) << Name() << ": Backward before Forward";
  CHECK_EQ(grad_out.size(), in_->size());
  const int64_t n = dense_ ? in_->dim(0) : in_->dim(1);
  if (grad_in != nullptr) EnsureShape(grad_in, in_->shape());
  if (options_.per_position) return BackwardPerPosition(grad_out, grad_in);
  int64_t cs, ns;
  Strides(n, &cs, &ns);
  const int64_t groups = per_element_ ? 1 : options_.groups;
  const int64_t cg = channels_ / groups, p_count = inner_;
  const double inv_m = 1.0 / static_cast<double>(cg * p_count);
  const bool affine = options_.affine;
  if (affine) {
    weight_acc_.assign(weight_.size(), 0.0);
    bias_acc_.assign(bias_.size(), 0.0);
  }
  T* dx = grad_in != nullptr ? grad_in->data() : nullptr;
  auto rows_of = [&](int64_t i) {
    const int64_t s = i / groups, g = i % groups;
    return GroupRows{in_->data() + s * ns,
                     grad_out.data() + s * ns,
                     dx != nullptr ? dx + s * ns : nullptr,
                     cs,
                     g * cg,
                     (g + 1) * cg,
                     mean_[i],
                     invstd_[i]};
  };
  // The input gradients of the (sample, group)s split over the compute
  // team. A weight per channel (GroupNorm) keeps each (sample, channel)'s
  // sums for the parameter gradients; a weight per element (LayerNorm)
  // adds each sample's terms to them as the sums pass on one thread, or
  // after them, split over the elements, on more: the same bits.
  const bool per_element_grads = affine && per_element_;
  // ElementParamGrads's ranges hold about kElementwiseGrain terms (n per
  // element): a layer with fewer than two of them would not split.
  const bool splits_elements =
      RangeSlots() > 1 &&
      channels_ * p_count >= 2 * std::max(kRangeAlign, ItemGrain(n));
  const bool add_while_summing = per_element_grads && !splits_elements;
  const int64_t items = n * groups;
  group_sums_.assign(items, RowGradSums{});
  // Per-channel sums feed GroupNorm's parameter gradients alone.
  channel_sums_.resize(affine && !per_element_ ? n * channels_ : 0);
  if (add_while_summing) {
    for (int64_t i = 0; i < items; ++i) {
      GroupGradSums(rows_of(i), i / groups, true, &group_sums_[i]);
    }
  }
  ParallelItems(items, ItemGrain(cg * p_count), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const GroupRows rows = rows_of(i);
      if (!add_while_summing) {
        GroupGradSums(rows, i / groups, false, &group_sums_[i]);
      }
      if (dx != nullptr) {
        GroupInputGrad(rows, group_sums_[i].g * inv_m,
                       group_sums_[i].g_xh * inv_m);
      }
    }
  });
  if (!affine) return;
  if (per_element_grads && !add_while_summing) {
    ElementParamGrads(grad_out.data(), n, cs, ns);
  } else if (!per_element_) {
    ChannelParamGrads(n);
  }
  for (int64_t k = 0; k < weight_.size(); ++k) {
    weight_grad_[k] = static_cast<T>(weight_acc_[k]);
    bias_grad_[k] = static_cast<T>(bias_acc_[k]);
  }
}

// GroupNorm's weight and bias gradients: each channel's sums over the n
// samples, added in sample order.
template <typename T>
void NormBase<T>::ChannelParamGrads(int64_t n) {
  for (int64_t s = 0; s < n; ++s) {
    const RowGradSums* sums = channel_sums_.data() + s * channels_;
    for (int64_t c = 0; c < channels_; ++c) {
      weight_acc_[c] += sums[c].g_xh;
      bias_acc_[c] += sums[c].g;
    }
  }
}

// LayerNorm's weight and bias gradients over ranges of the per-sample
// elements, each range adding the samples' terms in sample order.
template <typename T>
void NormBase<T>::ElementParamGrads(const T* dy, int64_t n, int64_t cs,
                                    int64_t ns) {
  const int64_t p_count = inner_;
  const T* x = in_->data();
  ParallelRanges(channels_ * p_count, ItemGrain(n), [&](int64_t b, int64_t e) {
    for (int64_t s = 0; s < n; ++s) {
      for (int64_t k = b; k < e;) {
        const int64_t c = k / p_count, p = k % p_count;
        const int64_t len = std::min(e - k, p_count - p);
        const int64_t o = c * cs + s * ns + p;
        AddRowParamGrads(x + o, dy + o, len, mean_[s], invstd_[s],
                         weight_acc_.data() + k, bias_acc_.data() + k);
        k += len;
      }
    }
  });
}

// One (sample, group) of Backward, sample s: sums gy and gy * xh over it
// into *total. With a weight per channel its share of the parameter
// gradients goes into channel_sums_ (dy and dy * xh per channel; kept only
// with affine parameters); with one per element, into the accumulators when
// `add_params`.
template <typename T>
void NormBase<T>::GroupGradSums(const GroupRows& rows, int64_t s,
                                bool add_params, RowGradSums* total) {
  const int64_t p_count = inner_;
  const bool affine = options_.affine;
  RowGradSums* per_channel =
      channel_sums_.empty() ? nullptr : channel_sums_.data() + s * channels_;
  if (!per_element_ && p_count == 1) {  // one element a channel
    double g = 0, g_xh = 0;
    for (int64_t c = rows.c_begin; c < rows.c_end; ++c) {
      const int64_t o = c * rows.c_stride;
      const double dy = rows.dy[o];
      const double dy_xh = dy * ((rows.x[o] - rows.mean) * rows.invstd);
      const double w = affine ? static_cast<double>(weight_[c]) : 1.0;
      g += w * dy;
      g_xh += w * dy_xh;
      if (per_channel != nullptr) per_channel[c] = {dy, dy_xh};
    }
    total->g += g;
    total->g_xh += g_xh;
    return;
  }
  for (int64_t c = rows.c_begin; c < rows.c_end; ++c) {
    const T* r = rows.x + c * rows.c_stride;
    const T* d = rows.dy + c * rows.c_stride;
    if (affine && per_element_) {
      const RowGradSums sums = RowGradientSumsPerElement(
          r, d, weight_.data() + c * p_count, p_count, rows.mean, rows.invstd,
          add_params ? weight_acc_.data() + c * p_count : nullptr,
          add_params ? bias_acc_.data() + c * p_count : nullptr);
      total->g += sums.g;
      total->g_xh += sums.g_xh;
      continue;
    }
    // One weight for the channel (1 without affine).
    const RowGradSums sums =
        RowGradientSums(r, d, p_count, rows.mean, rows.invstd);
    const double w = affine ? static_cast<double>(weight_[c]) : 1.0;
    total->g += w * sums.g;
    total->g_xh += w * sums.g_xh;
    if (per_channel != nullptr) per_channel[c] = sums;
  }
}

// dx of one (sample, group), with a = mean(gy) and b = mean(gy * xh).
template <typename T>
void NormBase<T>::GroupInputGrad(const GroupRows& rows, double a, double b) {
  const int64_t p_count = inner_;
  const bool affine = options_.affine;
  for (int64_t c = rows.c_begin; c < rows.c_end; ++c) {
    const T* r = rows.x + c * rows.c_stride;
    const T* d = rows.dy + c * rows.c_stride;
    T* o = rows.dx + c * rows.c_stride;
    if (affine && per_element_) {
      const T* w = weight_.data() + c * p_count;
      for (int64_t p = 0; p < p_count; ++p) {
        const double xh = (r[p] - rows.mean) * rows.invstd;
        o[p] = static_cast<T>(rows.invstd *
                              (static_cast<double>(d[p]) * w[p] - a - xh * b));
      }
    } else {
      const double w = affine ? static_cast<double>(weight_[c]) : 1.0;
      for (int64_t p = 0; p < p_count; ++p) {
        const double xh = (r[p] - rows.mean) * rows.invstd;
        o[p] = static_cast<T>(rows.invstd * (d[p] * w - a - xh * b));
      }
    }
  }
}

// Two passes over the rows (mean, then the biased variance around it) with
// one accumulator per column, then the normalised output row by row.
template <typename T>
void NormBase<T>::ForwardPerPosition(const BasicTensor<T>& in,
                                     BasicTensor<T>* out) {
  const int64_t c_count = channels_, m = in.size() / channels_;
  col_mean_.assign(m, T(0));
  col_invstd_.assign(m, T(0));
  // Columns are independent: ranges of them split over the compute team
  // give the bits of one thread.
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / c_count);
  ParallelRanges(m, grain, [&](int64_t begin, int64_t end) {
    ForwardColumns(in.data(), m, begin, end, out->data());
  });
}

template <typename T>
void NormBase<T>::ForwardColumns(const T* x, int64_t m, int64_t begin,
                                 int64_t end, T* y) {
  const int64_t c_count = channels_;
  T* mean = col_mean_.data();
  T* var = col_invstd_.data();
  for (int64_t c = 0; c < c_count; ++c) {
    const T* r = x + c * m;
    for (int64_t j = begin; j < end; ++j) mean[j] += r[j];
  }
  const T inv_c = T(1) / static_cast<T>(c_count);
  for (int64_t j = begin; j < end; ++j) mean[j] *= inv_c;
  for (int64_t c = 0; c < c_count; ++c) {
    const T* r = x + c * m;
    for (int64_t j = begin; j < end; ++j) {
      const T dv = r[j] - mean[j];
      var[j] += dv * dv;
    }
  }
  const T eps = static_cast<T>(options_.eps);
  for (int64_t j = begin; j < end; ++j)
    var[j] = T(1) / std::sqrt(var[j] * inv_c + eps);
  const T* invstd = var;
  for (int64_t c = 0; c < c_count; ++c) {
    const T* r = x + c * m;
    T* o = y + c * m;
    const T w = options_.affine ? weight_[c] : T(1);
    const T b = options_.affine ? bias_[c] : T(0);
    for (int64_t j = begin; j < end; ++j) {
      o[j] = (r[j] - mean[j]) * invstd[j] * w + b;
    }
  }
}

// Per column over its C features, with xh = (x - mean) * invstd and
// gy = dy * weight[c]: dx = invstd * (gy - mean_c(gy) - xh * mean_c(gy xh));
// dweight[c] = sum over columns of dy * xh, dbias[c] = sum of dy. The input
// gradient splits over ranges of columns and the parameter gradients over
// ranges of channels; each sum runs in one order on one thread, so every
// thread count gives the bits of one.
template <typename T>
void NormBase<T>::BackwardPerPosition(const BasicTensor<T>& grad_out,
                                      BasicTensor<T>* grad_in) {
  const int64_t c_count = channels_, m = in_->size() / channels_;
  const T* x = in_->data();
  const T* dy = grad_out.data();
  if (options_.affine) {
    const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / m);
    ParallelItems(c_count, grain, [&](int64_t begin, int64_t end) {
      ParamGradRows(x, dy, m, begin, end);
    });
  }
  if (grad_in == nullptr) return;
  col_a_.assign(m, T(0));
  col_b_.assign(m, T(0));
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / c_count);
  ParallelRanges(m, grain, [&](int64_t begin, int64_t end) {
    InputGradColumns(x, dy, m, begin, end, grad_in->data());
  });
}

template <typename T>
void NormBase<T>::ParamGradRows(const T* x, const T* dy, int64_t m,
                                int64_t c_begin, int64_t c_end) {
  const T* mean = col_mean_.data();
  const T* invstd = col_invstd_.data();
  for (int64_t c = c_begin; c < c_end; ++c) {
    const T* r = x + c * m;
    const T* d = dy + c * m;
    T dw = 0, db = 0;
    for (int64_t j = 0; j < m; ++j) {
      dw += d[j] * ((r[j] - mean[j]) * invstd[j]);
      db += d[j];
    }
    weight_grad_[c] = dw;
    bias_grad_[c] = db;
  }
}

template <typename T>
void NormBase<T>::InputGradColumns(const T* x, const T* dy, int64_t m,
                                   int64_t begin, int64_t end, T* g) {
  const T* mean = col_mean_.data();
  const T* invstd = col_invstd_.data();
  T* a = col_a_.data();
  T* b = col_b_.data();
  const bool affine = options_.affine;
  for (int64_t c = 0; c < channels_; ++c) {
    const T* r = x + c * m;
    const T* d = dy + c * m;
    const T w = affine ? weight_[c] : T(1);
    for (int64_t j = begin; j < end; ++j) {
      const T xh = (r[j] - mean[j]) * invstd[j];
      const T gy = d[j] * w;
      a[j] += gy;
      b[j] += gy * xh;
    }
  }
  const T inv_c = T(1) / static_cast<T>(channels_);
  for (int64_t j = begin; j < end; ++j) {
    a[j] *= inv_c;
    b[j] *= inv_c;
  }
  for (int64_t c = 0; c < channels_; ++c) {
    const T* r = x + c * m;
    const T* d = dy + c * m;
    T* o = g + c * m;
    const T w = affine ? weight_[c] : T(1);
    for (int64_t j = begin; j < end; ++j) {
      const T xh = (r[j] - mean[j]) * invstd[j];
      o[j] = invstd[j] * (d[j] * w - a[j] - xh * b[j]);
    }
  }
}

template class NormBase<float>;
template class NormBase<double>;

}  // namespace cohort
