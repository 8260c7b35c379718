#include "common/residual_branch.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

using Layers = google::protobuf::RepeatedPtrField<LayerSpec>;

// The name of sub-layer `part` ("conv1") of `residual`, "" for none.
std::string PartName(const LayerSpec& residual, const std::string& part) {
  if (!residual.name().empty()) return absl::StrCat(residual.name(), ".", part);
  const auto it = residual.tensor_names().find(absl::StrCat(part, ".weight"));
  if (it == residual.tensor_names().end()) return "";
  const std::string& tensor = it->second;
  constexpr absl::string_view kWeight = ".weight";
  if (!absl::EndsWith(tensor, kWeight) || tensor.size() == kWeight.size()) {
    return "";
  }
  return tensor.substr(0, tensor.size() - kWeight.size());
}

// A bias-free convolution as the importer writes one: stride always,
// padding where it is not 0.
void AddConv(Layers* path, int64_t out, int kernel, int stride,
             const std::string& name) {
  LayerSpec* l = path->Add();
  ConvSpec* c = l->mutable_conv2d();
  c->set_out_channels(static_cast<int32_t>(out));
  c->set_kernel(kernel);
  c->set_stride(stride);
  c->set_padding(kernel / 2);
  c->set_no_bias(true);
  if (!name.empty()) l->set_name(name);
}

// PyTorch's batch norm defaults, as the importer writes them.
void AddBatchNorm(Layers* path, const std::string& name) {
  LayerSpec* l = path->Add();
  l->mutable_batchnorm2d()->set_eps(1e-5f);
  l->mutable_batchnorm2d()->set_momentum(0.1f);
  if (!name.empty()) l->set_name(name);
}

void AddRelu(Layers* path) { path->Add()->mutable_relu(); }

}  // namespace

std::vector<LayerSpec> ResidualAsBranch(const LayerSpec& residual,
                                        int64_t in_channels) {
  const ResidualSpec& r = residual.residual();
  const int64_t out = r.out_channels();
  const int stride = r.stride() > 0 ? r.stride() : 1;
  auto name = [&](const std::string& part) { return PartName(residual, part); };
  LayerSpec branch;
  BranchSpec* b = branch.mutable_branch();
  b->set_combine(BranchSpec::SUM);
  Layers* main = b->add_paths()->mutable_layers();
  if (r.bottleneck()) {
    AddConv(main, out / 4, 1, 1, name("conv1"));
    AddBatchNorm(main, name("bn1"));
    AddRelu(main);
    AddConv(main, out / 4, 3, stride, name("conv2"));
    AddBatchNorm(main, name("bn2"));
    AddRelu(main);
    AddConv(main, out, 1, 1, name("conv3"));
    AddBatchNorm(main, name("bn3"));
  } else {
    AddConv(main, out, 3, stride, name("conv1"));
    AddBatchNorm(main, name("bn1"));
    AddRelu(main);
    AddConv(main, out, 3, 1, name("conv2"));
    AddBatchNorm(main, name("bn2"));
  }
  Layers* shortcut = b->add_paths()->mutable_layers();
  if (stride != 1 || in_channels != out) {
    AddConv(shortcut, out, 1, stride, name("downsample.0"));
    AddBatchNorm(shortcut, name("downsample.1"));
  }
  LayerSpec relu;
  relu.mutable_relu();
  return {branch, relu};
}

int64_t ChannelsBefore(const Layers& layers, int at) {
  for (int i = at - 1; i >= 0; --i) {
    const LayerSpec& l = layers[i];
    if (l.has_conv2d()) return l.conv2d().out_channels();
    if (l.has_residual()) return l.residual().out_channels();
    if (!(l.has_batchnorm2d() || l.has_relu() || l.has_relu6() ||
          l.has_maxpool2d() || l.has_avgpool2d() || l.has_dropout())) {
      return 0;
    }
  }
  return 0;
}

void ExpandResidualLayers(Layers* layers) {
  // Every block's input channels before any is written out: a branch does
  // not say its channels to ChannelsBefore.
  std::vector<int64_t> in(layers->size());
  for (int i = 0; i < layers->size(); ++i) {
    if ((*layers)[i].has_residual()) in[i] = ChannelsBefore(*layers, i);
  }
  Layers out;
  for (int i = 0; i < layers->size(); ++i) {
    if (in[i] == 0) {
      *out.Add() = std::move((*layers)[i]);
      continue;
    }
    for (LayerSpec& l : ResidualAsBranch((*layers)[i], in[i])) {
      *out.Add() = std::move(l);
    }
  }
  layers->Swap(&out);
}

}  // namespace cohort
