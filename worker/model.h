// A sequential model: a list of layers, its parameters in flat buffers, and
// the activations of the last forward pass.
//
// Build it with worker/zoo.h. Input batches come in the engine's layouts
// (worker/layers/layer.h): dense {N, F} or batch-inner {C, N, ...}.
//
// Ownership: the model owns its layers, activations and gradient buffer;
// its parameter values are its own, or shared with another model
// (CreateReplica) so that in-process replicas hold one copy. Thread safety:
// none; one thread drives a model (replicas on other threads each drive
// their own).
#ifndef COHORT_WORKER_MODEL_H_
#define COHORT_WORKER_MODEL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "common/tensor_names.h"
#include "worker/layers/layer.h"
#include "worker/layers/param_store.h"

namespace cohort {

class BackwardHelper;

template <typename T>
class Model {
 public:
  using LayerList = std::vector<std::unique_ptr<Layer<T>>>;

  // Configures `layers` for per-sample input shape `input_shape` and
  // allocates parameters (uninitialised; call InitializeParameters).
  // InvalidArgument names the first layer whose input does not fit, an
  // embedding anywhere but first (only the input holds token ids), or a
  // tied_lm_head with no embedding layer before it.
  //
  // Weight tying: every TiedLmHead reads the weight of the model's
  // Embedding (layer 0) and writes its gradient there;
  // the embedding's Backward, which runs after the heads', then adds its
  // own. The tied weight lives in the embedding's range of the flat buffer,
  // so Backward's ready(offset) stays right: that range is final only
  // after the embedding's Backward.
  static absl::StatusOr<std::unique_ptr<Model>> Create(
      LayerList layers, const Shape& input_shape);

  // A model with its own layers (built identically, e.g. by the zoo) whose
  // parameter values are views of `owner`'s. `owner` must outlive it.
  static absl::StatusOr<std::unique_ptr<Model>> CreateReplica(LayerList layers,
                                                              Model& owner);

  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // PyTorch's default initialisation, drawn from `seed`.
  void InitializeParameters(uint64_t seed);
  // Seeds dropout; replicas pass different seeds.
  void SeedRandom(uint64_t seed);

  // Runs every layer; the result stays valid until the next Forward. In
  // kTrain mode `input` must stay alive and unchanged until Backward.
  const BasicTensor<T>& Forward(const BasicTensor<T>& input, Mode mode);
  // What was wrong with the last Forward's input, from the first layer
  // that says (Layer::InputError): the caller fails the step with it.
  absl::Status InputError() const;
  // Every layer's FreezeParameters (layer.h): for a model whose parameters
  // will not change again, such as one loaded to predict.
  void FreezeParameters();
  // Back-propagates dLoss/dOutput of the last kTrain Forward; afterwards
  // grads() holds this batch's parameter gradients. Gradients are final
  // from the back of the flat buffer forward: after each layer with
  // parameters, `ready(offset)` (if given) says that every gradient at
  // index >= offset is final, so communication can start on it.
  //
  // On a compute team of two threads, where every activation of the batch
  // is small (model.cc's kHelperActivations), Backward carries the input
  // gradients down on the calling thread while a helper thread runs the
  // convolutions' weight gradients (kernels/backward_helper.h); ready()
  // then comes once the helper has finished the layer's. It stops trying
  // once a backward pass had no weight gradient to hand over.
  void Backward(const BasicTensor<T>& grad_output,
                const std::function<void(int64_t)>& ready = nullptr);

  // The sparse tables (ParamDecl::sparse), in declaration order, their
  // ids 0, 1, ... that order; param_store().sparse_entries() names them.
  const std::vector<SparseTable*>& sparse_tables() const {
    return sparse_tables_;
  }
  // Where every sparse table fetches its rows; `fetcher` must outlive the
  // model's use of them.
  void SetRowFetcher(RowFetcher* fetcher);
  // Reports every layer's training-mode Forward and Backward calls, and
  // those of the layers inside them, to `trace` (layer_trace.h); null
  // stops. `trace` must outlive the model's use of it.
  void SetTrace(LayerTrace* trace);

  BasicTensor<T>& params() { return store_.values(); }
  BasicTensor<T>& grads() { return store_.grads(); }
  const ParamStore<T>& param_store() const { return store_; }
  int64_t num_parameters() const { return store_.num_parameters(); }
  // Non-parameter state (BatchNorm running statistics), in a fixed order.
  std::vector<BasicTensor<T>*> Buffers();
  // Their names, as PyTorch's state_dict of an nn.Sequential of the same
  // layers gives them ("1.running_mean", "4.downsample.1.running_var"); the
  // parameters' are param_store().entries()' names. These position names
  // are the engine's own; files use TensorName's.
  std::vector<std::string> BufferNames() const;

  // The name a parameter or buffer is saved, exported and loaded under:
  // its position name (above), or the name its layer has in the spec
  // (common/tensor_names.h).
  std::string TensorName(const std::string& position_name) const {
    return names_.Of(position_name);
  }
  void set_tensor_names(TensorNames names) { names_ = std::move(names); }

  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return output_shape_; }
  // Each layer's per-sample output shape.
  const std::vector<Shape>& layer_outputs() const { return layer_outputs_; }
  // One line per layer with its output shape and parameter count.
  std::string Summary() const;

 private:
  Model(LayerList layers, Shape input_shape);
  absl::Status Configure();
  // Weight tying (see Create): finds the embedding and the heads and sizes
  // the heads, before Configure; hands the heads the embedding's bound
  // views, after the store is built.
  absl::Status FindTiedLayers();
  void TieWeights();
  void ConnectBlockedNeighbours();
  void ComputeLayerOffsets();
  // Whether Backward hands weight gradients to a helper thread.
  bool HelperPays() const;
  // Backward's layer loop; `helper` may be null.
  void BackwardLayers(const BasicTensor<T>& grad_output,
                      const std::function<void(int64_t)>& ready,
                      BackwardHelper* helper);
  void CollectSparseTables();

  LayerList layers_;
  std::vector<Layer<T>*> raw_layers_;
  Shape input_shape_;
  Shape output_shape_;
  std::vector<Shape> layer_outputs_;  // per-sample, for Summary
  // Offset of each layer's first parameter in the flat buffer (or -1).
  std::vector<int64_t> layer_offsets_;
  ParamStore<T> store_;
  std::vector<SparseTable*> sparse_tables_;  // owned by their layers
  size_t tied_embedding_ = 0;         // with tied_heads_: the first embedding
  std::vector<size_t> tied_heads_;    // indices of the TiedLmHead layers
  std::vector<BasicTensor<T>> acts_;  // acts_[i]: output of layer i
  // Layers whose activation the layer before applies (layer_fusion.h):
  // Forward and Backward pass over them.
  std::vector<bool> skipped_;
  LayerTrace* trace_ = nullptr;
  std::vector<std::string> trace_names_;  // "<i> <Name()>", with trace_
  TensorNames names_;
  BasicTensor<T> grad_a_, grad_b_;  // ping-pong input gradients
  // With the helper thread: helper_grads_[i], layer i's input gradient.
  std::vector<BasicTensor<T>> helper_grads_;
  bool helper_idle_ = false;  // a helped Backward handed nothing over
};

extern template class Model<float>;
extern template class Model<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_MODEL_H_
