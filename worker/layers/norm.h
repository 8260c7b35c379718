// Per-sample normalisation with PyTorch's semantics: LayerNorm
// (nn.LayerNorm(normalized_shape = the whole per-sample shape)) and
// GroupNorm (nn.GroupNorm(groups, C)). Both normalise with statistics of
// one sample (biased variance), in training and evaluation alike, so they
// keep no running statistics.
//
// Layouts (layer.h): dense {N, F}, batch-inner {C, N, L} and {C, N, H, W}.
// LayerNorm's weight and bias have the per-sample shape ({F}, {C, L},
// {C, H, W}) in PyTorch's order; GroupNorm's are per channel ({C}; a dense
// input's features are its channels). `no_affine` drops them.
//
// Ownership: the layer owns its per-sample statistics and gradient
// accumulators; it does not own its parameters (views bound by the model)
// and keeps a pointer to the last forward input, which the caller keeps
// alive until Backward. Thread safety: none; one replica's thread drives a
// layer.
#ifndef COHORT_WORKER_LAYERS_NORM_H_
#define COHORT_WORKER_LAYERS_NORM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/norm_rows.h"
#include "worker/layers/layer.h"

namespace cohort {

struct NormOptions {
  double eps = 1e-5;  // must be > 0
  bool affine = true;
  int64_t groups = 1;         // GroupNorm only
  bool per_position = false;  // LayerNorm on {C, L} only, see above
};

// Both layers: statistics per (sample, group of channels), affine per
// element (LayerNorm) or per channel (GroupNorm).
template <typename T>
class NormBase : public Layer<T> {
 public:
  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<ParamDecl> Params() const override;
  void Bind(std::vector<BasicTensor<T>> values,
            std::vector<BasicTensor<T>> grads) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 protected:
  NormBase(const char* kind, NormOptions o, bool per_element)
      : kind_(kind), options_(o), per_element_(per_element) {}

 private:
  // Where element (channel c, sample n, position p) lives: c * c_stride +
  // n * n_stride + p, for the batch of `n` samples.
  void Strides(int64_t n, int64_t* c_stride, int64_t* n_stride) const;
  // per_position: columns of the {C, N * L} matrix.
  void ForwardPerPosition(const BasicTensor<T>& in, BasicTensor<T>* out);
  // Columns [begin, end) of ForwardPerPosition (x and y {C, m}).
  void ForwardColumns(const T* x, int64_t m, int64_t begin, int64_t end, T* y);
  // One (sample, group): rows of channel c at x, dy and dx + c * c_stride.
  // Backward: dx null when no input gradient is wanted. Forward: dx is the
  // output, dy unused.
  struct GroupRows {
    const T* x;
    const T* dy;
    T* dx;
    int64_t c_stride, c_begin, c_end;
    double mean, invstd;
  };
  // Forward over one (sample, group) of m elements, with rows.dx the
  // output rows: its mean and 1/std, then the normalised rows.
  void GroupStats(const GroupRows& rows, double m, double* mean,
                  double* invstd) const;
  void NormalizeGroup(const GroupRows& rows, T mean, T invstd) const;
  void GroupGradSums(const GroupRows& rows, int64_t s, bool add_params,
                     RowGradSums* total);
  // LayerNorm's parameter gradients after the sums, over ranges of the
  // per-sample elements (rows of channel c at x and dy + c * cs + s * ns).
  void ElementParamGrads(const T* dy, int64_t n, int64_t cs, int64_t ns);
  // GroupNorm's parameter gradients from channel_sums_.
  void ChannelParamGrads(int64_t n);
  void GroupInputGrad(const GroupRows& rows, double a, double b);
  void BackwardPerPosition(const BasicTensor<T>& grad_out,
                           BasicTensor<T>* grad_in);
  // Channels [c_begin, c_end) of BackwardPerPosition's weight and bias
  // gradients (x and dy {C, m}).
  void ParamGradRows(const T* x, const T* dy, int64_t m, int64_t c_begin,
                     int64_t c_end);
  // Columns [begin, end) of BackwardPerPosition's input gradient g.
  void InputGradColumns(const T* x, const T* dy, int64_t m, int64_t begin,
                        int64_t end, T* g);

  const char* kind_;
  NormOptions options_;
  const bool per_element_;  // LayerNorm: weight per (c, p)
  Shape in_shape_;          // per sample
  bool dense_ = false;
  int64_t channels_ = 0, inner_ = 0;  // per sample: C and positions (P)
  BasicTensor<T> weight_, bias_, weight_grad_, bias_grad_;  // views
  std::vector<double> mean_, invstd_;  // per (sample, group)
  std::vector<double> weight_acc_, bias_acc_;
  // Backward's sums per (sample, group) and, with a weight per channel,
  // per (sample, channel).
  std::vector<RowGradSums> group_sums_, channel_sums_;
  const BasicTensor<T>* in_ = nullptr;
  // per_position: per-column statistics and backward sums, reused.
  std::vector<T> col_mean_, col_invstd_, col_a_, col_b_;
};

template <typename T>
class LayerNorm : public NormBase<T> {
 public:
  explicit LayerNorm(NormOptions o)
      : NormBase<T>("layernorm", Whole(o), true) {}

 private:
  static NormOptions Whole(NormOptions o) {
    o.groups = 1;
    return o;
  }
};

template <typename T>
class GroupNorm : public NormBase<T> {
 public:
  explicit GroupNorm(NormOptions o) : NormBase<T>("groupnorm", o, false) {}
};

extern template class NormBase<float>;
extern template class NormBase<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_NORM_H_
