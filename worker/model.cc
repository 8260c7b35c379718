#include "worker/model.h"

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/backward_helper.h"
#include "worker/layers/embedding.h"
#include "worker/layers/layer_fusion.h"
#include "worker/layers/tied_lm_head.h"

namespace cohort {

template <typename T>
Model<T>::Model(LayerList layers, Shape input_shape)
    : layers_(std::move(layers)), input_shape_(std::move(input_shape)) {
  for (auto& l : layers_) raw_layers_.push_back(l.get());
  acts_.resize(layers_.size());
}

template <typename T>
absl::Status Model<T>::Configure() {
  if (layers_.empty()) {
    return absl::InvalidArgumentError("the model has no layers");
  }
  RETURN_IF_ERROR(FindTiedLayers());
  Shape shape = input_shape_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    absl::StatusOr<Shape> out = layers_[i]->Configure(shape);
    if (!out.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", i, " (", layers_[i]->Name(), ") cannot take ",
          "input of shape ", ShapeString(shape), ": ", out.status().message()));
    }
    shape = *std::move(out);
    layer_outputs_.push_back(shape);
  }
  output_shape_ = shape;
  ConnectBlockedNeighbours();
  skipped_ = FuseActivations(layers_);
  trace_names_.assign(layers_.size(), std::string());
  return absl::OkStatus();
}

template <typename T>
void Model<T>::FreezeParameters() {
  for (auto& l : layers_) l->FreezeParameters();
}

// Neighbours that keep the same channel-blocked layout hand their
// activations and gradients over in it (layer.h); the model's input and
// output stay in the engine's layouts.
template <typename T>
void Model<T>::ConnectBlockedNeighbours() {
  for (size_t i = 0; i < layers_.size(); ++i) {
    const int64_t block = layers_[i]->channel_block();
    if (block == 0) continue;
    const bool input = i > 0 && layers_[i - 1]->channel_block() == block;
    const bool output =
        i + 1 < layers_.size() && layers_[i + 1]->channel_block() == block;
    layers_[i]->set_blocked_neighbours(input, output);
  }
}

template <typename T>
absl::Status Model<T>::FindTiedLayers() {
  Embedding<T>* embedding = nullptr;
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto* e = dynamic_cast<Embedding<T>*>(layers_[i].get());
    // Only the model's input holds token ids; anything a layer computes
    // is not one.
    if (e != nullptr && i > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", i, " (", e->Name(),
          "): an embedding must be the model's first layer, where the token "
          "ids arrive"));
    }
    if (e != nullptr) {
      embedding = e;
      tied_embedding_ = i;
    }
    auto* head = dynamic_cast<TiedLmHead<T>*>(layers_[i].get());
    if (head == nullptr) continue;
    if (embedding == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", i, ": tied_lm_head needs an embedding layer before it"));
    }
    head->SetVocab(embedding->vocab_size(), embedding->dim());
    tied_heads_.push_back(i);
  }
  return absl::OkStatus();
}

template <typename T>
void Model<T>::TieWeights() {
  if (tied_heads_.empty()) return;
  auto* embedding = static_cast<Embedding<T>*>(layers_[tied_embedding_].get());
  BasicTensor<T>& w = embedding->weight();
  BasicTensor<T>& g = embedding->grad_weight();
  // Backward visits the heads last to first, then the embedding: the last
  // head overwrites this batch's gradient, everyone after it adds.
  for (size_t h : tied_heads_) {
    static_cast<TiedLmHead<T>*>(layers_[h].get())
        ->Tie(BasicTensor<T>::View(w.data(), w.shape()),
              BasicTensor<T>::View(g.data(), g.shape()),
              /*accumulate=*/h != tied_heads_.back());
  }
  embedding->set_accumulate_grad(true);
}

template <typename T>
absl::StatusOr<std::unique_ptr<Model<T>>> Model<T>::Create(
    LayerList layers, const Shape& input_shape) {
  std::unique_ptr<Model> m(new Model(std::move(layers), input_shape));
  RETURN_IF_ERROR(m->Configure());
  m->store_.Build(absl::MakeSpan(m->raw_layers_));
  m->TieWeights();
  m->ComputeLayerOffsets();
  m->CollectSparseTables();
  return m;
}

template <typename T>
absl::StatusOr<std::unique_ptr<Model<T>>> Model<T>::CreateReplica(
    LayerList layers, Model& owner) {
  std::unique_ptr<Model> m(new Model(std::move(layers), owner.input_shape_));
  RETURN_IF_ERROR(m->Configure());
  if (m->layer_outputs_ != owner.layer_outputs_) {
    return absl::InternalError("replica layers differ from the owner's");
  }
  m->store_.BuildShared(absl::MakeSpan(m->raw_layers_), owner.store_);
  // The replica's heads read the shared values and write its own gradients.
  m->TieWeights();
  m->ComputeLayerOffsets();
  m->CollectSparseTables();
  return m;
}

template <typename T>
void Model<T>::InitializeParameters(uint64_t seed) {
  Rng rng(seed);
  store_.Initialize(rng);
}

template <typename T>
void Model<T>::SeedRandom(uint64_t seed) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->SeedRandom(seed * 1000003 + i);
  }
}

template <typename T>
const BasicTensor<T>& Model<T>::Forward(const BasicTensor<T>& input,
                                        Mode mode) {
  const BasicTensor<T>* x = &input;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (skipped_[i]) continue;
    TraceLayerCall(mode == Mode::kTrain ? trace_ : nullptr, trace_names_[i],
                   /*backward=*/false,
                   [&] { layers_[i]->Forward(*x, &acts_[i], mode); });
    x = &acts_[i];
  }
  return *x;
}

template <typename T>
void Model<T>::CollectSparseTables() {
  for (auto& l : layers_) l->CollectSparseTables(&sparse_tables_);
  CHECK_EQ(sparse_tables_.size(), store_.sparse_entries().size())
      << "layers declare sparse tables they do not hand over";
  for (size_t i = 0; i < sparse_tables_.size(); ++i) {
    sparse_tables_[i]->set_id(static_cast<int>(i));
  }
}

template <typename T>
void Model<T>::SetRowFetcher(RowFetcher* fetcher) {
  for (SparseTable* t : sparse_tables_) t->set_fetcher(fetcher);
}

template <typename T>
void Model<T>::SetTrace(LayerTrace* trace) {
  trace_ = trace;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::string position = std::to_string(i);
    if (trace != nullptr) {
      trace_names_[i] = absl::StrCat(position, " ", layers_[i]->Name());
    }
    layers_[i]->TraceSublayers(trace, position);
  }
}

template <typename T>
absl::Status Model<T>::InputError() const {
  for (const auto& l : layers_) RETURN_IF_ERROR(l->InputError());
  return absl::OkStatus();
}

namespace {

// Handing weight gradients to a helper thread pays where one thread runs a
// layer's kernels nearly as fast as two: ResNet-18 at 32x32 input, batch
// 32 (largest activation 2^19 floats, the stem's), on a 2-core AVX-512 VM.
// Models with larger activations (ResNet-18 at CIFAR's layout, ResNet-50
// and MobileNetV2 at 224) keep both threads on every layer: their kernels
// split well, and their batch norms and activations, which stay with the
// calling thread, would leave it the longer half of the work.
constexpr int64_t kHelperActivations = int64_t{1} << 19;

// ready(offset) calls held back until the helper has run the weight
// gradients handed to it before them; with no helper, passed on at once.
class HeldReady {
 public:
  HeldReady(const std::function<void(int64_t)>& ready,
            const BackwardHelper* helper)
      : ready_(ready), helper_(helper) {}

  void Add(int64_t offset) {
    if (helper_ == nullptr) {
      ready_(offset);
      return;
    }
    held_.push_back({helper_->pushed(), offset});
    Release(helper_->done());
  }
  // Passes on the calls whose weight gradients are among the first `done`.
  void Release(int64_t done) {
    for (; next_ < held_.size() && held_[next_].first <= done; ++next_) {
      ready_(held_[next_].second);
    }
  }

 private:
  const std::function<void(int64_t)>& ready_;
  const BackwardHelper* helper_;
  std::vector<std::pair<int64_t, int64_t>> held_;  // (tasks, offset)
  size_t next_ = 0;
};

}  // namespace

template <typename T>
bool Model<T>::HelperPays() const {
  if (!std::is_same_v<T, float> || helper_idle_) {
    return false;
  }
  for (const BasicTensor<T>& a : acts_) {
    if (a.size() > kHelperActivations) return false;
  }
  return true;
}

template <typename T>
void Model<T>::Backward(const BasicTensor<T>& grad_output,
                        const std::function<void(int64_t)>& ready) {
  if (HelperPays()) {
    int64_t handed = 0;
    const bool helped = BackwardHelper::Run([&](BackwardHelper& helper) {
      BackwardLayers(grad_output, ready, &helper);
      handed = helper.pushed();
    });
    if (helped) {
      helper_idle_ = handed == 0;
      return;
    }
  }
  BackwardLayers(grad_output, ready, nullptr);
}

template <typename T>
void Model<T>::BackwardLayers(const BasicTensor<T>& grad_output,
                              const std::function<void(int64_t)>& ready,
                              BackwardHelper* helper) {
  HeldReady held(ready, helper);
  // With a helper, each layer's input gradient gets a buffer of its own:
  // weight gradients handed over may still read one that ping-pong
  // buffers would already have reused. The activations are small then.
  if (helper != nullptr) helper_grads_.resize(layers_.size());
  const BasicTensor<T>* g = &grad_output;
  for (size_t i = layers_.size(); i-- > 0;) {
    if (skipped_[i]) continue;
    BasicTensor<T>* gin = nullptr;
    if (i > 0 && helper != nullptr) {
      gin = &helper_grads_[i];
    } else if (i > 0) {
      gin = (g == &grad_a_) ? &grad_b_ : &grad_a_;
    }
    TraceLayerCall(trace_, trace_names_[i], /*backward=*/true,
                   [&] { layers_[i]->Backward(*g, gin); });
    if (ready && layer_offsets_[i] >= 0) held.Add(layer_offsets_[i]);
    g = gin;
  }
  if (helper != nullptr) helper->Finish();
  if (!ready) return;
  held.Release(INT64_MAX);
  ready(0);
}

template <typename T>
void Model<T>::ComputeLayerOffsets() {
  layer_offsets_.assign(layers_.size(), -1);
  for (const auto& e : store_.entries()) {
    const size_t layer = std::stoul(e.name.substr(0, e.name.find('.')));
    if (layer_offsets_[layer] < 0) layer_offsets_[layer] = e.offset;
  }
}

template <typename T>
std::vector<BasicTensor<T>*> Model<T>::Buffers() {
  std::vector<BasicTensor<T>*> out;
  for (auto& l : layers_) {
    for (BasicTensor<T>* b : l->Buffers()) out.push_back(b);
  }
  return out;
}

template <typename T>
std::vector<std::string> Model<T>::BufferNames() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (const std::string& b : layers_[i]->BufferNames()) {
      out.push_back(absl::StrCat(i, ".", b));
    }
  }
  return out;
}

template <typename T>
std::string Model<T>::Summary() const {
  std::string s = absl::StrCat("input ", ShapeString(input_shape_), "\n");
  std::vector<int64_t> counts(layers_.size(), 0);
  for (const auto& e : store_.entries()) {
    counts[std::stoi(e.name.substr(0, e.name.find('.')))] +=
        NumElements(e.shape);
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    absl::StrAppendFormat(&s, "%3d %-28s -> %-16s %9d params\n", i,
                          layers_[i]->Name(), ShapeString(layer_outputs_[i]),
                          counts[i]);
  }
  absl::StrAppend(&s, "total ", store_.num_parameters(), " parameters");
  return s;
}

template class Model<float>;
template class Model<double>;

}  // namespace cohort
