// The optimizer update rules over a flat parameter buffer: one fused pass
// over parameters, gradients and state per step, with PyTorch's update
// rules exactly (torch.optim.SGD, Adam, AdamW; dampening 0, no amsgrad).
//
//   SGD:   g = grad + wd * p;  b = mu * b + g;  d = nesterov ? g + mu * b : b
//          (d = g without momentum);  p -= lr * d.  The first step gives
//          b = g because the buffer starts at zero.
//   Adam:  g = grad + wd * p (L2);  t += 1;  m = m + (1 - b1) (g - m);
//          v = b2 v + (1 - b2) g^2;
//          p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//   AdamW: as Adam without the L2 term, after p *= 1 - lr * wd (decoupled).
//   RMSprop (torch.optim.RMSprop): g = grad + wd * p;
//          s = alpha s + (1 - alpha) g^2;  centered: a = alpha a + (1 -
//          alpha) g, d = sqrt(s - a^2) + eps, else d = sqrt(s) + eps;
//          momentum: b = mu b + g / d, p -= lr b;  else p -= lr g / d.
//   Adagrad (torch.optim.Adagrad): g = grad + wd * p;  t += 1;
//          s += g^2 (s starts at initial_accumulator_value);
//          p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(s) + eps).  An
//          element whose gradient is 0 (a row of an embedding table no
//          sample touched) keeps its value and its sum, as PyTorch's sparse
//          Adagrad leaves untouched rows.
//
// Two rules scale each parameter TENSOR's step by a ratio of norms over
// that whole tensor (a "trust ratio", 1 where either norm is 0):
//   LAMB (You et al. 2019, as the common PyTorch implementations): t += 1;
//          m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2  (g = grad);
//          u = (m / (1 - b1^t)) / (sqrt(v) / sqrt(1 - b2^t) + eps) + wd p;
//          r = ||p|| / ||u|| over the tensor;  p -= lr * r * u.
//   LARS (You et al. 2017): local = tc * ||p|| / (||grad|| + wd ||p||)
//          over the tensor;  b = mu b + local * (grad + wd p);  p -= lr b
//          (b = local * (grad + wd p) without momentum).
// Their norms come from the elements of the tensor, wherever they are
// stepped: the CPU engine steps slices of the flat buffer in parallel, and
// a tensor can cross slices. So those rules step in two passes (BeginStep,
// which writes sums per piece -- a tensor cut at every multiple of
// kNormBlock of the buffer -- and FinishStep, given every tensor's totals,
// FoldPieceSums), and the results are bit-identical whatever the slicing
// as long as slices start and end on multiples of kNormBlock.
//
// Weight decay exclusion: each tensor says whether decay applies to it
// (ParamTensor::decay); a rule steps excluded tensors with wd = 0.
//
// Written once here for every CPU user: the CPU engine (worker/optim/
// optimizer.h makes these from a job's OptimizerSpec) and the
// parameter-server shard (server/ps/shard_state.h). The CUDA kernels
// (kernels/cuda/ops.h) do the same operations with the same scalars
// (common/update_options.h).
//
// Ownership: a rule owns its state (momentum buffer; Adam's m, v and step
// count), sized for `num_elements` at construction; Step never allocates.
// The caller owns parameters and gradients. Thread safety: none; one thread
// steps a given rule. Rules over disjoint slices of one buffer may run
// BeginStep concurrently on one sums array: each writes only its own
// pieces' entries.
#ifndef COHORT_KERNELS_UPDATE_RULES_H_
#define COHORT_KERNELS_UPDATE_RULES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "common/tensor.h"
#include "common/update_options.h"

namespace cohort {

// One parameter tensor of a flat buffer: [begin, end) in elements, its
// padding included (padding is zero with a zero gradient, and every rule
// keeps it zero), and whether weight decay applies to it.
struct ParamTensor {
  int64_t begin = 0;
  int64_t end = 0;
  bool decay = true;
};

// Per-tensor sums are gathered per piece: a tensor cut at every multiple of
// this many elements of the whole buffer.
inline constexpr int64_t kNormBlock = 1024;

// One piece, within the elements a rule steps.
struct Segment {
  int64_t begin = 0;  // in the rule's own elements (0 = its first)
  int64_t end = 0;
  int32_t tensor = 0;  // index among the buffer's tensors
  int64_t piece = 0;   // index among the whole buffer's pieces
  bool decay = true;   // weight decay applies
};

// The pieces a rule steps, in order, and the whole buffer's counts (the
// sizes of BeginStep's and FinishStep's arrays).
struct RuleLayout {
  std::vector<Segment> segments;
  int64_t num_pieces = 0;
  int32_t num_tensors = 0;
};

// The layout of [begin, end) of a buffer made of `tensors` (in order,
// adjacent: the padded tensors of common/model_sizes.h). Elements of the
// range outside every tensor are not stepped. Empty `tensors`: [begin,
// end) is one tensor with decay.
RuleLayout MakeRuleLayout(const std::vector<ParamTensor>& tensors,
                          int64_t begin, int64_t end);

// The tensors of a flat buffer of padded tensors `padded_sizes` (common/
// model_sizes.h's PaddedParamSizes), each with decay unless its flag in
// `no_decay` is set (empty: decay on every tensor).
std::vector<ParamTensor> ParamTensorsOf(
    const std::vector<int64_t>& padded_sizes,
    const std::vector<bool>& no_decay);

// A maximal run of segments with the same decay, in a rule's elements:
// what the elementwise rules (SGD, Adam, RMSprop) step in one kernel call,
// one for the whole buffer when no tensor is excluded from decay. Used by
// the CPU rules and the GPU engine alike.
struct DecayRun {
  int64_t begin = 0;
  int64_t end = 0;
  bool decay = true;
};
std::vector<DecayRun> DecayRuns(const RuleLayout& layout, int64_t n);

// Per-tensor totals from per-piece sums: totals[t * k + j] is the sum, over
// tensor t's pieces in `whole` (the layout of the whole buffer) in order,
// of piece_sums[piece * k + j]. `totals` has whole.num_tensors * k values.
void FoldPieceSums(const RuleLayout& whole, int k, const double* piece_sums,
                   double* totals);

template <typename T>
class UpdateRule {
 public:
  virtual ~UpdateRule() = default;

  // params -= update(grads), with learning rate `lr` for this step. Both
  // spans have the num_elements the rule was made for. LAMB and LARS take
  // their norms over the rule's own elements only (both passes below).
  virtual void Step(absl::Span<T> params, absl::Span<const T> grads,
                    double lr) = 0;

  // LAMB and LARS: sums per piece (0 for every elementwise rule, whose
  // Step does everything).
  virtual int SumsPerPiece() const { return 0; }
  // Pass one: writes sums[piece * SumsPerPiece() + j] for each of its
  // segments' pieces (LAMB: ||p||^2, ||u||^2; LARS: ||p||^2, ||grad||^2).
  // LAMB advances its moments here: FinishStep must follow.
  virtual void BeginStep(absl::Span<const T> params, absl::Span<const T> grads,
                         double* sums) {}
  // Pass two: the update, given every tensor's totals (FoldPieceSums).
  virtual void FinishStep(absl::Span<T> params, absl::Span<const T> grads,
                          double lr, const double* totals) {}

  // State tensors for checkpoints, in a fixed order: SGD and LARS with
  // momentum {buffer}, without none; Adam/AdamW and LAMB {m, v, step},
  // where `step` has shape {1} and holds the number of steps taken (exact
  // in float up to 2^24 steps); RMSprop {square_avg} then {momentum buffer}
  // with momentum, then {grad_avg} when centered; Adagrad {sum, step}. Writing
  // into them restores a checkpoint.
  virtual std::vector<BasicTensor<T>*> State() = 0;
};

// Each for a flat buffer of `num_elements` laid out as `layout` (its
// segments relative to the rule's first element; an empty layout is one
// tensor with decay).
// SGD (with momentum and Nesterov as `options` says).
template <typename T>
std::unique_ptr<UpdateRule<T>> MakeSgdRule(const SgdOptions& options,
                                           int64_t num_elements,
                                           const RuleLayout& layout = {});

// Adam, or AdamW when options.decoupled.
template <typename T>
std::unique_ptr<UpdateRule<T>> MakeAdamRule(const AdamOptions& options,
                                            int64_t num_elements,
                                            const RuleLayout& layout = {});

template <typename T>
std::unique_ptr<UpdateRule<T>> MakeRmspropRule(const RmspropOptions& options,
                                               int64_t num_elements,
                                               const RuleLayout& layout = {});

template <typename T>
std::unique_ptr<UpdateRule<T>> MakeAdagradRule(const AdagradOptions& options,
                                               int64_t num_elements,
                                               const RuleLayout& layout = {});

template <typename T>
std::unique_ptr<UpdateRule<T>> MakeLambRule(const LambOptions& options,
                                            int64_t num_elements,
                                            const RuleLayout& layout = {});

template <typename T>
std::unique_ptr<UpdateRule<T>> MakeLarsRule(const LarsOptions& options,
                                            int64_t num_elements,
                                            const RuleLayout& layout = {});

// The rule `options.kind` names, with its options.
template <typename T>
std::unique_ptr<UpdateRule<T>> MakeUpdateRule(const RuleOptions& options,
                                              int64_t num_elements,
                                              const RuleLayout& layout = {});

#define COHORT_DECLARE_RULE(Make, Options, T)             \
  extern template std::unique_ptr<UpdateRule<T>> Make<T>( \
      const Options&, int64_t, const RuleLayout&);
#define COHORT_DECLARE_RULES(T)                           \
  COHORT_DECLARE_RULE(MakeSgdRule, SgdOptions, T)         \
  COHORT_DECLARE_RULE(MakeAdamRule, AdamOptions, T)       \
  COHORT_DECLARE_RULE(MakeRmspropRule, RmspropOptions, T) \
  COHORT_DECLARE_RULE(MakeAdagradRule, AdagradOptions, T) \
  COHORT_DECLARE_RULE(MakeLambRule, LambOptions, T)       \
  COHORT_DECLARE_RULE(MakeLarsRule, LarsOptions, T)       \
  COHORT_DECLARE_RULE(MakeUpdateRule, RuleOptions, T)
COHORT_DECLARE_RULES(float)
COHORT_DECLARE_RULES(double)
#undef COHORT_DECLARE_RULES
#undef COHORT_DECLARE_RULE

}  // namespace cohort

#endif  // COHORT_KERNELS_UPDATE_RULES_H_
