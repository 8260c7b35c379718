// torchvision's ResNet blocks in an imported layer list become residual
// layers. A BasicBlock or Bottleneck arrives as a SUM branch (the main
// path's convolutions, batch norms and ReLUs beside the identity or a 1x1
// convolution and a batch norm) and the ReLU after it: what one residual
// layer computes. The residual layer keeps its activations in oneDNN's
// channel-blocked layout and fuses each batch norm with the ReLU or the sum
// after it (worker/layers/residual.h); the branch reorders into and out of
// every convolution pass and runs each layer on its own.
//
// Only exact matches fuse: convolutions without bias, groups or dilation,
// batch norms with PyTorch's eps and momentum (the residual layer's), the
// downsample exactly where the residual layer makes one. Anything else stays
// a branch. The block's tensors keep their names: the block takes the
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
#include "common/tensor_names.h"

namespace cohort {
namespace onnx_import_internal {
namespace {

using Layers = google::protobuf::RepeatedPtrField<LayerSpec>;

// Whether `l` is a bias-free convolution with exactly these settings.
bool IsConv(const LayerSpec& l, int64_t out, int kernel, int stride,
            int padding) {
  if (!l.has_conv2d() || !l.tensor_names().empty()) return false;
  ConvSpec c = l.conv2d();
  const bool match = c.out_channels() == out && c.kernel() == kernel &&
                     std::max(c.stride(), 1) == stride &&
                     c.padding() == padding && c.no_bias() && c.groups() <= 1 &&
                     c.dilation() <= 1;
  // Nothing else set: no rectangular window, padding mode or the like.
  c.clear_out_channels();
  c.clear_kernel();
  c.clear_stride();
  c.clear_padding();
  c.clear_no_bias();
  c.clear_groups();
  c.clear_dilation();
  return match && c.ByteSizeLong() == 0;
}

// Whether `l` is a batch norm with the residual layer's eps and momentum.
bool IsBatchNorm(const LayerSpec& l) {
  if (!l.has_batchnorm2d() || !l.tensor_names().empty()) return false;
  BatchNormSpec b = l.batchnorm2d();
  const bool match = (b.eps() == 0 || b.eps() == 1e-5f) &&
                     (b.momentum() == 0 || b.momentum() == 0.1f);
  b.clear_eps();
  b.clear_momentum();
  return match && b.ByteSizeLong() == 0;
}

bool IsRelu(const LayerSpec& l) {
  return l.has_relu() && l.tensor_names().empty();
}

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

// The stride of a main path that is a BasicBlock's (out, 3x3) or a
// Bottleneck's (out / 4, 1x1; 3x3; out, 1x1), 0 for neither; sets
// *bottleneck and names the parts.
int MainPath(const Layers& p, int64_t out, bool* bottleneck,
             std::map<int, std::string>* parts) {
  for (int s = 1; s <= 2; ++s) {
    if (p.size() == 5 && IsConv(p[0], out, 3, s, 1) && IsBatchNorm(p[1]) &&
        IsRelu(p[2]) && IsConv(p[3], out, 3, 1, 1) && IsBatchNorm(p[4])) {
      *bottleneck = false;
      *parts = {{0, "conv1"}, {1, "bn1"}, {3, "conv2"}, {4, "bn2"}};
      return s;
    }
    const int64_t width = out / 4;
    if (p.size() == 8 && out % 4 == 0 && IsConv(p[0], width, 1, 1, 0) &&
        IsBatchNorm(p[1]) && IsRelu(p[2]) && IsConv(p[3], width, 3, s, 1) &&
        IsBatchNorm(p[4]) && IsRelu(p[5]) && IsConv(p[6], out, 1, 1, 0) &&
        IsBatchNorm(p[7])) {
      *bottleneck = true;
      *parts = {{0, "conv1"}, {1, "bn1"},   {3, "conv2"},
                {4, "bn2"},   {6, "conv3"}, {7, "bn3"}};
      return s;
    }
  }
  return 0;
}

// The input channels of the convolution whose weight is `name`, 0 when
// there is no such 4-D tensor.
int64_t InChannels(const std::vector<SafeTensor>& weights,
                   const std::string& name) {
  for (const SafeTensor& w : weights) {
    if (w.name == name && w.shape.size() == 4) return w.shape[1];
  }
  return 0;
}

// The residual layer that layer `at` (a branch) and the ReLU after it
// compute together, if any.
bool AsBlock(const Layers& layers, int at,
             const std::vector<SafeTensor>& weights, Block* block) {
  const LayerSpec& l = layers[at];
  if (!l.has_branch() || l.branch().combine() != BranchSpec::SUM ||
      l.branch().paths_size() != 2 || !l.tensor_names().empty() ||
      !IsRelu(layers[at + 1])) {
    return false;
  }
  const int main = l.branch().paths(0).layers_size() >= 5 ? 0 : 1;
  const Layers& path = l.branch().paths(main).layers();
  const Layers& shortcut = l.branch().paths(1 - main).layers();
  if (path.size() < 5) return false;
  const int64_t out = path[path.size() - 2].conv2d().out_channels();
  bool bottleneck = false;
  std::map<int, std::string> parts;
  const int stride = MainPath(path, out, &bottleneck, &parts);
  const int64_t in =
      InChannels(weights, absl::StrCat(at, ".paths.", main, ".0.weight"));
  if (stride == 0 || in == 0) return false;
  // The residual layer projects the shortcut exactly when the shape changes.
  if (stride != 1 || in != out) {
    if (shortcut.size() != 2 || !IsConv(shortcut[0], out, 1, stride, 0) ||
        !IsBatchNorm(shortcut[1])) {
      return false;
    }
  } else if (!shortcut.empty()) {
    return false;
  }
  block->spec.set_out_channels(static_cast<int32_t>(out));
  block->spec.set_stride(stride);
  block->spec.set_bottleneck(bottleneck);
  block->parts.clear();
  for (const auto& [index, part] : parts) {
    block->parts.push_back({main, index, part});
  }
  if (!shortcut.empty()) {
    block->parts.push_back({1 - main, 0, "downsample.0"});
    block->parts.push_back({1 - main, 1, "downsample.1"});
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
    if (!AsBlock(layers, i, *weights, &block)) continue;
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
    for (SafeTensor& w : *weights) {
      const std::string moved = Moved(w.name, i, block);
      // Unnamed tensors take the block's position names.
      if (!named && TopIndex(w.name) == i && before.Of(w.name) != w.name) {
        (*fused.mutable_tensor_names())[moved.substr(prefix.size())] =
            before.Of(w.name);
      }
      w.name = moved;
    }
    layers[i] = std::move(fused);
    layers.DeleteSubrange(i + 1, 1);
  }
}

}  // namespace onnx_import_internal
}  // namespace cohort
