// The layer interface of cohort's CPU engine.
//
// A layer transforms a batch of activations. Shapes carry the batch:
//   dense activations   {N, F}
//   1-D spatial         {C, N, L}
//   2-D spatial         {C, N, H, W}
// Sequences (transformers) use the 1-D layout: {D, N, L} holds D features
// at each of L positions, column n * L + t being sample n's position t, so
// a position-wise linear map is one matrix product over the whole batch.
// Spatial tensors are "batch-inner" (channel-major): a convolution over the
// whole batch is then one large matrix product (out[OC, N*P] = W * col),
// and per-channel work (BatchNorm, bias) runs over contiguous memory. The
// model converts the data set's NCHW input once at its entry and Flatten
// converts back to {N, C*H*W} with PyTorch's (C, H, W) feature order, so
// weights are laid out exactly as PyTorch lays them out.
//
// Parameters are declared by the layer (ParamDecl) and stored by the model in
// one flat buffer (and gradients in another), so that the distributed layer
// can reduce them in buckets; Bind() hands the layer views into those
// buffers. Backward() *overwrites* the parameter gradients with this batch's
// gradient (no accumulation, so no zeroing pass is needed).
//
// Ownership: a layer owns its scratch buffers and cached activations; it
// does not own the parameter memory. Thread safety: none; one replica's
// thread drives a layer.
#ifndef COHORT_WORKER_LAYERS_LAYER_H_
#define COHORT_WORKER_LAYERS_LAYER_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "kernels/fused_activation.h"
#include "worker/layers/layer_trace.h"
#include "worker/layers/sparse_table.h"

namespace cohort {

// The engine's random generator (initialisation, dropout, data).
using Rng = std::mt19937_64;

enum class Mode { kTrain, kEval };

// A parameter a layer needs. `init` says how Reset() fills it.
struct ParamDecl {
  enum class Init {
    kKaimingUniform,  // U(-b, b), b = 1/sqrt(fan_in): PyTorch's default for
                      // Linear/Conv weights (kaiming_uniform_, a = sqrt(5)).
    kFanInUniform,    // the same bound for biases.
    kOnes,            // BatchNorm scale.
    kZeros,           // BatchNorm shift.
    kNormal,          // N(0, std^2): GPT-2's 0.02 for transformer weights.
    kConstant,        // every element `value`: PReLU's starting slopes.
    kRowUniform,      // {rows, dim}, row r = SparseRowInit(seed, r, dim,
                      // 1/sqrt(fan_in)) with one seed drawn per tensor
                      // (common/sparse_rows.h): a table's initial rows are
                      // the same whether it is dense or sparse.
  };
  std::string name;  // e.g. "weight", "bias"
  Shape shape;
  Init init = Init::kZeros;
  int64_t fan_in = 1;
  double std = 0.02;  // kNormal only
  double value = 0;   // kConstant only
  // A sparse table (EmbeddingBagSpec.sparse): named and initialised like
  // the others, but kept out of the flat buffers (the layer reads it by
  // row through its SparseTable); Bind hands it empty views.
  bool sparse = false;
  // Which tensors weight decay skips (optimizer.no_decay_bias_and_norm)
  // follows from the layer specs: common/model_sizes.h.
};

template <typename T>
class Layer {
 public:
  virtual ~Layer() = default;

  // "conv2d(3->6, k5)" etc., for messages and summaries.
  virtual std::string Name() const = 0;

  // Configures the layer for inputs of per-sample shape `in` (without the
  // batch dimension: {F}, {C, L} or {C, H, W}) and returns the per-sample
  // output shape, or InvalidArgument naming the layer and both shapes when
  // the input does not fit. Called once, before Params().
  virtual absl::StatusOr<Shape> Configure(const Shape& in) = 0;

  // Parameters, in a fixed order (after Configure). Default: none.
  virtual std::vector<ParamDecl> Params() const { return {}; }

  // Views into the model's flat buffers, one per Params() entry, same order.
  virtual void Bind(std::vector<BasicTensor<T>> values,
                    std::vector<BasicTensor<T>> grads) {}

  // Non-parameter state that must match across replicas and be saved
  // (BatchNorm running statistics). Default: none.
  virtual std::vector<BasicTensor<T>*> Buffers() { return {}; }
  // Buffers()' names, as PyTorch's state_dict gives them ("running_mean").
  virtual std::vector<std::string> BufferNames() const { return {}; }

  // Channel-blocked hand-over between neighbours (kernels/channel_blocked.h):
  // the block of oneDNN's layout this layer keeps its activations in inside
  // and can take its input and give its output in, after Configure; 0 (the
  // default) for none.
  virtual int64_t channel_block() const { return 0; }
  // Called by the model after Configure when the layer before (`input`) or
  // after (`output`) has the same channel_block(): that side's activation
  // and its gradient then pass in the blocked layout, unconverted.
  virtual void set_blocked_neighbours(bool input, bool output) {}

  // Activation fusion in a chain of layers (layer_fusion.h). An activation
  // layer says which FusedActivation it computes (kNone, the default, for
  // every other layer); a layer that can apply that activation to its own
  // output as it writes it, and take the gradient through it in Backward,
  // agrees to FuseActivation after Configure, and the chain then skips the
  // activation layer. A layer that agrees reads its last Forward's output
  // in Backward: the caller keeps it alive and unchanged until then.
  virtual FusedActivation fused_activation_kind() const {
    return FusedActivation::kNone;
  }
  virtual bool FuseActivation(FusedActivation act) { return false; }

  // Says that the parameter values will not change again (a model loaded
  // to predict): a layer may keep what it derives from them (weights
  // converted to another layout) from one Forward to the next.
  virtual void FreezeParameters() {}

  // A layer that runs other layers reports their training-mode Forward
  // and Backward calls to `trace` (layer_trace.h), naming each by `prefix`
  // "." its position; null stops. Called after Configure. Default: none to
  // report.
  virtual void TraceSublayers(LayerTrace* trace, const std::string& prefix) {}

  // Sets the seed of any randomness the layer draws while training
  // (dropout); replicas get different streams.
  virtual void SeedRandom(uint64_t seed) {}

  // What was wrong with the last Forward's input, for a layer that reads
  // values only the data can get wrong (an embedding bag's row ids from a
  // data set that does not check them): InvalidArgument naming the layer,
  // sample and value; OK otherwise. Such a layer computes with a harmless
  // stand-in (row 0) instead of failing, and whoever called Forward fails
  // the step with this status.
  virtual absl::Status InputError() const { return absl::OkStatus(); }

  // The sparse tables this layer reads by row (its ParamDecls marked
  // sparse, same order), appended to `out`. Default: none.
  virtual void CollectSparseTables(std::vector<SparseTable*>* out) {}

  // `in` has the batch dimension (see the layouts above). The layer may keep
  // a pointer to `in` for Backward: the caller keeps it alive and unchanged
  // until then. `out` is resized by the layer.
  virtual void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                       Mode mode) = 0;

  // Given dLoss/dOut of the last Forward (mode kTrain), writes the parameter
  // gradients and, unless `grad_in` is null (first layer: nobody needs it),
  // dLoss/dIn.
  virtual void Backward(const BasicTensor<T>& grad_out,
                        BasicTensor<T>* grad_in) = 0;
};

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_LAYER_H_
