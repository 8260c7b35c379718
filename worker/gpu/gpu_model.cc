#include "worker/gpu/gpu_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "kernels/cuda/cuda_status.h"
#include "worker/gpu/layers/gpu_embedding.h"
#include "worker/gpu/layers/gpu_layer_factory.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

absl::Status Upload(float* device, const float* host, int64_t n) {
  return CopyToDevice(device, host, n * sizeof(float), "copying to the device");
}

absl::Status Download(float* host, const float* device, int64_t n) {
  return CudaStatus(
      cudaMemcpy(host, device, n * sizeof(float), cudaMemcpyDeviceToHost),
      "copying from the device");
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuModel>> GpuModel::Create(
    const ModelSpec& spec, const Shape& input_shape, Model<float>& cpu,
    GpuContext* context, Precision precision) {
  RETURN_IF_ERROR(context->Activate());
  std::unique_ptr<GpuModel> m(new GpuModel(context));
  ASSIGN_OR_RETURN(const std::vector<LayerSpec> specs, LayerSpecs(spec));
  Shape shape = input_shape;
  m->input_size_ = NumElements(input_shape);
  GpuEmbedding* first_embedding = nullptr;  // what a tied head shares
  for (const LayerSpec& s : specs) {
    ASSIGN_OR_RETURN(std::unique_ptr<GpuLayer> layer,
                     MakeGpuLayer(s, precision));
    if (auto* e = dynamic_cast<GpuEmbedding*>(layer.get());
        e != nullptr && first_embedding == nullptr) {
      first_embedding = e;
    }
    if (auto* head = dynamic_cast<GpuTiedHead*>(layer.get())) {
      // Weight tying: the head multiplies by the embedding's weight and
      // writes its gradient first; the embedding adds to it.
      if (first_embedding != nullptr) {
        head->Tie(first_embedding);
        first_embedding->set_tied(true);
      }
    }
    ASSIGN_OR_RETURN(shape, layer->Configure(shape));
    m->out_sizes_.push_back(NumElements(shape));
    m->layers_.push_back(std::move(layer));
  }
  m->output_shape_ = shape;
  // The CPU store's entries follow the layers' parameters in order.
  const auto& entries = cpu.param_store().entries();
  m->flat_size_ = cpu.params().size();
  RETURN_IF_ERROR(m->params_.Reserve(std::max<int64_t>(1, m->flat_size_)));
  RETURN_IF_ERROR(m->grads_.Reserve(std::max<int64_t>(1, m->flat_size_)));
  RETURN_IF_ERROR(
      CudaStatus(cudaMemset(m->grads_.data(), 0, m->flat_size_ * sizeof(float)),
                 "clearing gradients"));
  size_t e = 0;
  for (auto& layer : m->layers_) {
    const std::vector<int64_t> sizes = layer->ParamSizes();
    std::vector<float*> values, grads;
    m->layer_offsets_.push_back(sizes.empty() ? -1 : entries[e].offset);
    for (int64_t size : sizes) {
      if (e >= entries.size() || NumElements(entries[e].shape) != size) {
        return absl::InternalError(
            absl::StrCat("GPU ", layer->Name(), ": parameter ", e,
                         " does not match the CPU model's layout"));
      }
      values.push_back(m->params_.data() + entries[e].offset);
      grads.push_back(m->grads_.data() + entries[e].offset);
      ++e;
    }
    layer->Bind(values, grads);
  }
  if (e != entries.size()) {
    return absl::InternalError(absl::StrCat(
        "GPU model has ", e, " parameters, the CPU model ", entries.size()));
  }
  RETURN_IF_ERROR(m->CopyFromCpu(cpu));
  return m;
}

absl::Status GpuModel::ReserveActivations(int64_t n) {
  if (n <= n_) return absl::OkStatus();
  acts_.resize(layers_.size());
  int64_t widest = input_size_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    RETURN_IF_ERROR(acts_[i].Reserve(n * out_sizes_[i]));
    widest = std::max(widest, out_sizes_[i]);
  }
  RETURN_IF_ERROR(grad_a_.Reserve(n * widest));
  RETURN_IF_ERROR(grad_b_.Reserve(n * widest));
  n_ = n;
  return absl::OkStatus();
}

absl::StatusOr<const float*> GpuModel::Forward(const float* input, int64_t n,
                                               Mode mode) {
  RETURN_IF_ERROR(ReserveActivations(n));
  const float* x = input;
  for (size_t i = 0; i < layers_.size(); ++i) {
    RETURN_IF_ERROR(
        layers_[i]->Forward(*context_, x, acts_[i].data(), n, mode));
    x = acts_[i].data();
  }
  output_ = x;
  return x;
}

void GpuModel::SeedRandom(uint64_t seed) {
  // Each layer its own stream of masks, as the CPU model seeds its layers.
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->SeedRandom(seed * 1000003 + i);
  }
}

std::vector<std::pair<float*, int64_t>> GpuModel::buffers() const {
  std::vector<std::pair<float*, int64_t>> all;
  for (const auto& layer : layers_) {
    for (auto b : layer->Buffers()) all.push_back(b);
  }
  return all;
}

absl::Status GpuModel::Backward(const float* grad_output,
                                const std::function<void(int64_t)>& ready) {
  const float* dy = grad_output;
  float* buffers[2] = {grad_a_.data(), grad_b_.data()};
  for (size_t k = layers_.size(); k-- > 0;) {
    float* dx = k == 0 ? nullptr : buffers[k % 2];
    RETURN_IF_ERROR(layers_[k]->Backward(*context_, dy, dx));
    if (ready && layer_offsets_[k] >= 0) ready(layer_offsets_[k]);
    dy = dx;
  }
  return absl::OkStatus();
}

absl::Status GpuModel::CopyFromCpu(Model<float>& cpu) {
  RETURN_IF_ERROR(Upload(params_.data(), cpu.params().data(), flat_size_));
  std::vector<BasicTensor<float>*> host = cpu.Buffers();
  size_t i = 0;
  for (auto& layer : layers_) {
    for (auto [device, count] : layer->Buffers()) {
      if (i >= host.size() || host[i]->size() != count) {
        return absl::InternalError("GPU model buffers differ from the CPU's");
      }
      RETURN_IF_ERROR(Upload(device, host[i]->data(), count));
      ++i;
    }
  }
  return absl::OkStatus();
}

absl::Status GpuModel::CopyToCpu(Model<float>& cpu) const {
  RETURN_IF_ERROR(context_->Synchronize());
  RETURN_IF_ERROR(Download(cpu.params().data(), params_.data(), flat_size_));
  std::vector<BasicTensor<float>*> host = cpu.Buffers();
  size_t i = 0;
  for (const auto& layer : layers_) {
    for (auto [device, count] : layer->Buffers()) {
      if (i >= host.size() || host[i]->size() != count) {
        return absl::InternalError("GPU model buffers differ from the CPU's");
      }
      RETURN_IF_ERROR(Download(host[i]->data(), device, count));
      ++i;
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort
