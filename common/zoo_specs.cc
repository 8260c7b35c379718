#include "common/zoo_specs.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

// Appends layer specs with a terse syntax, so zoo definitions read like a
// table.
class Builder {
 public:
  Builder& Linear(int64_t out) {
    Next().mutable_linear()->set_out_features(out);
    return *this;
  }
  Builder& Conv2d(int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0,
                  bool bias = true) {
    Conv(Next().mutable_conv2d(), out, k, stride, pad, bias);
    return *this;
  }
  Builder& Conv1d(int64_t out, int64_t k, int64_t pad) {
    Conv(Next().mutable_conv1d(), out, k, 1, pad, true);
    return *this;
  }
  Builder& ReLU() {
    Next().mutable_relu();
    return *this;
  }
  // stride 0: the kernel size.
  Builder& MaxPool(int64_t k, int64_t stride = 0, int64_t pad = 0) {
    PoolSpec* p = Next().mutable_maxpool2d();
    p->set_kernel(k);
    p->set_stride(stride > 0 ? stride : k);
    p->set_padding(pad);
    return *this;
  }
  Builder& BN1d() {
    Next().mutable_batchnorm1d();
    return *this;
  }
  Builder& BN2d() {
    Next().mutable_batchnorm2d();
    return *this;
  }
  Builder& Flatten() {
    Next().mutable_flatten();
    return *this;
  }
  Builder& Block(int64_t out, int64_t stride, bool bottleneck) {
    ResidualSpec* r = Next().mutable_residual();
    r->set_out_channels(out);
    r->set_stride(stride);
    r->set_bottleneck(bottleneck);
    return *this;
  }
  Builder& GlobalPool() {
    Next().mutable_global_avgpool();
    return *this;
  }
  // Transformers.
  Builder& Embedding(int64_t vocab, int64_t dim) {
    EmbeddingSpec* e = Next().mutable_embedding();
    e->set_vocab_size(vocab);
    e->set_dim(dim);
    return *this;
  }
  Builder& PositionalEmbedding() {
    Next().mutable_positional_embedding();
    return *this;
  }
  Builder& TransformerBlock(int64_t heads, bool bidirectional = false) {
    TransformerBlockSpec* t = Next().mutable_transformer_block();
    t->set_heads(heads);
    t->set_bidirectional(bidirectional);
    return *this;
  }
  Builder& PositionLayerNorm() {
    Next().mutable_layernorm()->set_per_position(true);
    return *this;
  }
  Builder& TiedLmHead() {
    Next().mutable_tied_lm_head();
    return *this;
  }
  Builder& ToSequence() {
    Next().mutable_to_sequence();
    return *this;
  }
  Builder& SequenceMean() {
    Next().mutable_sequence_pool()->set_mode(SequencePoolSpec::MEAN);
    return *this;
  }
  // Recommendation models.
  Builder& Slice(int64_t begin, int64_t end) {
    SliceSpec* s = Next().mutable_slice();
    s->set_begin(begin);
    s->set_end(end);
    return *this;
  }
  Builder& EmbeddingBags(int tables, int64_t rows, int dim) {
    EmbeddingBagSpec* e = Next().mutable_embedding_bag();
    for (int t = 0; t < tables; ++t) e->add_rows(rows);
    e->set_dim(dim);
    return *this;
  }
  Builder& DotInteraction(int dim) {
    InteractionSpec* i = Next().mutable_interaction();
    i->set_kind(InteractionSpec::DOT);
    i->set_dim(dim);
    return *this;
  }
  // A CONCAT branch of the given paths' layers.
  Builder& Concat(std::vector<Builder> paths) {
    BranchSpec* branch = Next().mutable_branch();
    for (Builder& path : paths) {
      BranchSpec::Path* p = branch->add_paths();
      for (LayerSpec& l : path.Take()) *p->add_layers() = std::move(l);
    }
    return *this;
  }
  std::vector<LayerSpec> Take() { return std::move(layers_); }

 private:
  LayerSpec& Next() { return layers_.emplace_back(); }
  static void Conv(ConvSpec* c, int64_t out, int64_t k, int64_t stride,
                   int64_t pad, bool bias) {
    c->set_out_channels(out);
    c->set_kernel(k);
    c->set_stride(stride);
    c->set_padding(pad);
    c->set_no_bias(!bias);
  }

  std::vector<LayerSpec> layers_;
};

// Criteo's columns, and the rows of each of dlrm_small's tables (a CRITEO
// data set for it sets table_rows to this).
constexpr int64_t kCriteoDense = 13;
constexpr int kCriteoCategorical = 26;
constexpr int64_t kDlrmSmallRows = 32768;

void LeNetBody(Builder& b) {
  b.ReLU().MaxPool(2).Conv2d(16, 5).ReLU().MaxPool(2).Flatten();
  b.Linear(120).ReLU().Linear(84).ReLU().Linear(10);
}

// The four ResNet stages: blocks[i] blocks of out_channels widths[i]; the
// first block of each stage after the first halves the resolution.
void ResNetStages(Builder& b, const int64_t (&widths)[4],
                  const int (&blocks)[4], bool bottleneck) {
  for (int stage = 0; stage < 4; ++stage) {
    for (int i = 0; i < blocks[stage]; ++i) {
      b.Block(widths[stage], stage > 0 && i == 0 ? 2 : 1, bottleneck);
    }
  }
}

std::vector<LayerSpec> MakeZoo(const std::string& name) {
  Builder b;
  if (name == "mlp_seed") {
    b.Linear(200).ReLU().Linear(10);
  } else if (name == "mlp_mnist") {
    b.Flatten().Linear(256).ReLU().Linear(128).ReLU().Linear(10);
  } else if (name == "lenet5") {
    b.Conv2d(6, 5, 1, 2);
    LeNetBody(b);
  } else if (name == "lenet_cifar") {
    b.Conv2d(6, 5);
    LeNetBody(b);
  } else if (name == "conv1d_bn") {
    b.Conv1d(16, 3, 1).BN1d().ReLU().Conv1d(32, 3, 1).BN1d().ReLU();
    b.Conv1d(3, 3, 1);
  } else if (name == "resnet18_cifar") {
    b.Conv2d(64, 3, 1, 1, /*bias=*/false).BN2d().ReLU();
    ResNetStages(b, {64, 128, 256, 512}, {2, 2, 2, 2}, /*bottleneck=*/false);
    b.GlobalPool().Linear(10);
  } else if (name == "resnet50") {
    // torchvision's resnet50: 7x7 stem and max pool, bottleneck blocks.
    b.Conv2d(64, 7, 2, 3, /*bias=*/false).BN2d().ReLU().MaxPool(3, 2, 1);
    ResNetStages(b, {256, 512, 1024, 2048}, {3, 4, 6, 3}, /*bottleneck=*/true);
    b.GlobalPool().Linear(1000);
  } else if (name == "gpt_tiny") {
    // A GPT-2-style byte-level language model: pre-norm blocks, a final
    // layer norm, the output head tied to the token embedding.
    b.Embedding(256, 256).PositionalEmbedding();
    for (int i = 0; i < 4; ++i) b.TransformerBlock(4);
    b.PositionLayerNorm().TiedLmHead();
  } else if (name == "dlrm_small") {
    // DLRM (Naumov et al. 2019) for Criteo's 13 dense and 26 categorical
    // features: the dense ones through a bottom MLP to 16 features, each
    // categorical one through its own table of 16-feature rows, the dot
    // products of every pair of the 27 vectors, a top MLP to one logit.
    Builder bottom, sparse;
    bottom.Slice(0, kCriteoDense).Linear(64).ReLU().Linear(16).ReLU();
    sparse.Slice(kCriteoDense, kCriteoDense + 2 * kCriteoCategorical)
        .EmbeddingBags(kCriteoCategorical, kDlrmSmallRows, 16);
    std::vector<Builder> paths;
    paths.push_back(std::move(bottom));
    paths.push_back(std::move(sparse));
    b.Concat(std::move(paths)).DotInteraction(16);
    b.Linear(128).ReLU().Linear(64).ReLU().Linear(1);
  } else if (name == "vit_tiny") {
    // A vision transformer of ViT-Ti's width: 16x16 patches of 192
    // features, a learned position per patch, pre-norm encoder blocks
    // (nn.TransformerEncoderLayer(norm_first=True, activation="gelu")), a
    // final layer norm and the mean over patches instead of a class token.
    b.Conv2d(192, 16, 16).ToSequence().PositionalEmbedding();
    for (int i = 0; i < 4; ++i) b.TransformerBlock(3, /*bidirectional=*/true);
    b.PositionLayerNorm().SequenceMean().Linear(1000);
  }
  return b.Take();
}

const std::map<std::string, Shape>& ZooShapes() {
  static const auto* shapes = new std::map<std::string, Shape>{
      {"mlp_seed", {100}},
      {"mlp_mnist", {1, 28, 28}},
      {"lenet5", {1, 28, 28}},
      {"lenet_cifar", {3, 32, 32}},
      {"conv1d_bn", {3, 10000}},
      {"resnet18_cifar", {3, 32, 32}},
      {"resnet50", {3, 224, 224}},
      {"gpt_tiny", {1, 256}},
      {"vit_tiny", {3, 224, 224}},
      {"dlrm_small", {kCriteoDense + 2 * kCriteoCategorical}},
  };
  return *shapes;
}

// Zoo models that take token windows {1, L} of any length L (the data
// set's context): their positional table is sized from the input.
bool IsSequenceModel(const std::string& name) { return name == "gpt_tiny"; }

}  // namespace

std::vector<std::string> ZooModelNames() {
  std::vector<std::string> names;
  for (const auto& [name, shape] : ZooShapes()) names.push_back(name);
  return names;
}

absl::StatusOr<Shape> ZooInputShape(const std::string& name) {
  auto it = ZooShapes().find(name);
  if (it == ZooShapes().end()) {
    return absl::NotFoundError(absl::StrCat(
        "unknown zoo model \"", name,
        "\"; known models: ", absl::StrJoin(ZooModelNames(), ", ")));
  }
  return it->second;
}

absl::StatusOr<Shape> ZooInputShape(const std::string& name,
                                    const Shape& data) {
  ASSIGN_OR_RETURN(Shape designed, ZooInputShape(name));
  if (IsSequenceModel(name) && data.size() == 2 && data[0] == 1 &&
      data[1] > 0) {
    return data;
  }
  return designed;
}

absl::StatusOr<std::vector<LayerSpec>> LayerSpecs(const ModelSpec& spec) {
  if (!spec.zoo().empty()) {
    RETURN_IF_ERROR(ZooInputShape(spec.zoo()).status());
    return MakeZoo(spec.zoo());
  }
  if (spec.layers().empty()) {
    return absl::InvalidArgumentError(
        "the model names neither a zoo model nor any layers");
  }
  return std::vector<LayerSpec>(spec.layers().begin(), spec.layers().end());
}

}  // namespace cohort
