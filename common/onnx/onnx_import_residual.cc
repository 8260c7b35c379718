// torchvision's ResNet blocks in an imported layer list become residual
// layers. A BasicBlock or Bottleneck arrives as a SUM branch (the main
// path's convolutions, batch norms and ReLUs beside the identity or a 1x1
// convolution and a batch norm) and the ReLU after it: what one residual
// layer computes. The residual layer keeps its activations in oneDNN's
// channel-blocked layout and fuses each batch norm with the ReLU or the sum
// after it (worker/layers/residual.h); the branch reorders into and out of
// every convolution pass and runs each layer on its own.
//
// Only exact matches fuse: the branch and ReLU must be, field for field and
// name for name, what ResidualAsBranch writes for the residual layer
// (common/residual_branch.h: bias-free convolutions, PyTorch's batch norm
// defaults, the downsample exactly where the shape changes). Anything else
// stays a branch. The block's tensors keep their names: the block takes the
// modules' common prefix as its name ("layer1.0"), or LayerSpec.tensor_names
// when the sub-layers' names do not share one.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/onnx/onnx_importer.h"
#include "common/residual_branch.h"
#include "common/tensor_names.h"
#include "google/protobuf/util/message_differencer.h"

namespace cohort {
namespace onnx_import_internal {
namespace {

using google::protobuf::util::MessageDifferencer;
using Layers = google::protobuf::RepeatedPtrField<LayerSpec>;

// A layer of the branch that has tensors: where it sits (path, index) and
// its name in the residual layer ("conv1", "downsample.0").
struct Part {
  int path, index;
  std::string name;
  // "paths.P.J", its position inside the branch.
  std::string Position() const {
    return absl::StrCat("paths.", path, ".", index);
  }
};

// A block found at a top-level position: its spec and its parts.
struct Block {
  ResidualSpec spec;
  std::vector<Part> parts;
};

// The residual layer that layer `at` (a SUM branch, its main path first)
// and the ReLU after it would be, before the check that it computes
// exactly them; false when the branch cannot be one.
bool Candidate(const Layers& layers, int at, Block* block) {
  const LayerSpec& l = layers[at];
  if (!l.has_branch() || l.branch().combine() != BranchSpec::SUM ||
      l.branch().paths_size() != 2 || !layers[at + 1].has_relu()) {
    return false;
  }
  const Layers& path = l.branch().paths(0).layers();
  const bool bottleneck = path.size() == 8;
  if (path.size() != 5 && !bottleneck) return false;
  const LayerSpec& strided = path[bottleneck ? 3 : 0];
  const LayerSpec& last = path[path.size() - 2];
  if (!strided.has_conv2d() || !last.has_conv2d()) return false;
  const int32_t out = last.conv2d().out_channels();
  if (out <= 0 || (bottleneck && out % 4 != 0)) return false;
  block->spec.set_out_channels(out);
  block->spec.set_stride(std::max(strided.conv2d().stride(), 1));
  block->spec.set_bottleneck(bottleneck);
  block->parts.clear();
  const char* const names[] = {"conv1", "bn1",   nullptr, "conv2",
                               "bn2",   nullptr, "conv3", "bn3"};
  for (int j = 0; j < path.size(); ++j) {
    if (names[j] != nullptr) block->parts.push_back({0, j, names[j]});
  }
  if (l.branch().paths(1).layers_size() == 2) {
    block->parts.push_back({1, 0, "downsample.0"});
    block->parts.push_back({1, 1, "downsample.1"});
  }
  return true;
}

// The name the block's sub-layers share as "<name>.<part>", "" when they do
// not all have one.
std::string CommonName(const LayerSpec& branch, const Block& block) {
  std::string common;
  for (const Part& part : block.parts) {
    const std::string& name =
        branch.branch().paths(part.path).layers(part.index).name();
    const std::string suffix = absl::StrCat(".", part.name);
    if (!absl::EndsWith(name, suffix) || name.size() == suffix.size()) {
      return "";
    }
    const std::string prefix = name.substr(0, name.size() - suffix.size());
    if (!common.empty() && prefix != common) return "";
    common = prefix;
  }
  return common;
}

void CollectNames(const Layers& layers, std::set<std::string>* names) {
  for (const LayerSpec& l : layers) {
    if (!l.name().empty()) names->insert(l.name());
    for (const BranchSpec::Path& p : l.branch().paths()) {
      CollectNames(p.layers(), names);
    }
  }
}

// The position name `name` after fusing layers `at` and `at + 1` into
// block `b` at `at`: "<at>.<part>..." for the branch's tensors, one index
// less after the pair.
std::string Moved(const std::string& name, int at, const Block& b) {
  const int index = TopIndex(name);
  if (index < at) return name;
  const std::string tail = name.substr(name.find('.') + 1);
  if (index > at + 1) return absl::StrCat(index - 1, ".", tail);
  for (const Part& part : b.parts) {
    const std::string position = part.Position();
    if (absl::StartsWith(tail, absl::StrCat(position, "."))) {
      return absl::StrCat(at, ".", part.name, tail.substr(position.size()));
    }
  }
  return name;
}

}  // namespace

void FuseResidualBlocks(ModelSpec* model, std::vector<SafeTensor>* weights) {
  Layers& layers = *model->mutable_layers();
  for (int i = 0; i + 1 < layers.size(); ++i) {
    Block block;
    const int64_t in = ChannelsBefore(layers, i);
    if (in == 0 || !Candidate(layers, i, &block)) continue;
    // A stride that keeps the width projects the shortcut in torchvision
    // but not in a residual layer over a 1x1 input, whose shape it keeps;
    // torchvision's ResNets never build one.
    if (block.spec.stride() != 1 && in == block.spec.out_channels()) continue;
    const TensorNames before(
        std::vector<LayerSpec>(layers.begin(), layers.end()));
    std::set<std::string> names;
    CollectNames(layers, &names);
    LayerSpec fused;
    *fused.mutable_residual() = block.spec;
    const std::string common = CommonName(layers[i], block);
    const bool named = !common.empty() && names.count(common) == 0;
    if (named) fused.set_name(common);
    const std::string prefix = absl::StrCat(i, ".");
    for (const SafeTensor& w : *weights) {
      // Unnamed tensors take the block's position names.
      if (named || TopIndex(w.name) != i) continue;
      const std::string saved = before.Of(w.name);
      if (saved == w.name) continue;
      (*fused.mutable_tensor_names())[Moved(w.name, i, block)
                                          .substr(prefix.size())] = saved;
    }
    // Exactly the layers the residual layer computes, names included.
    const std::vector<LayerSpec> written = ResidualAsBranch(fused, in);
    if (!MessageDifferencer::Equals(written[0], layers[i]) ||
        !MessageDifferencer::Equals(written[1], layers[i + 1])) {
      continue;
    }
    for (SafeTensor& w : *weights) w.name = Moved(w.name, i, block);
    layers[i] = std::move(fused);
    layers.DeleteSubrange(i + 1, 1);
  }
}

}  // namespace onnx_import_internal
}  // namespace cohort
