// The GpuEngine's optimizer (gpu_engine_impl.h): its state on each GPU,
// gradient clipping, and the update rules' kernels over the averaged
// gradient, in the CPU rules' order and arithmetic (kernels/update_rules.h).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/optimizer_options.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/grad_ops.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/reduce.h"
#include "worker/gpu/gpu_engine_impl.h"
#include "worker/optim/optimizer.h"

namespace cohort {
namespace gpu_engine {

absl::Status GpuEngine::SetupOptimizerState(Device& d) {
  const int64_t flat = d.model->flat_size();
  auto zeroed = [&](DeviceFloats& buffer) -> absl::Status {
    RETURN_IF_ERROR(buffer.Reserve(std::max<int64_t>(1, flat)));
    return CudaStatus(cudaMemset(buffer.data(), 0, flat * sizeof(float)),
                      "clearing optimizer state");
  };
  if (whole_layout_.segments.empty()) {
    ASSIGN_OR_RETURN(const std::vector<ParamTensor> tensors,
                     JobParamTensors(spec_, data_.train->sample_shape()));
    if (tensors.empty() || tensors.back().end != flat) {
      return absl::InternalError(
          absl::StrCat("the GPU model's flat buffer has ", flat,
                       " parameters but its layer specs give ",
                       tensors.empty() ? 0 : tensors.back().end));
    }
    whole_layout_ = MakeRuleLayout(tensors, 0, flat);
    decay_runs_ = DecayRuns(whole_layout_, flat);
  }
  const OptimizerSpec& o = spec_.optimizer();
  switch (o.kind()) {
    case OptimizerSpec::SGD:
    case OptimizerSpec::LARS:
      if (o.momentum() != 0) RETURN_IF_ERROR(zeroed(d.momentum));
      break;
    case OptimizerSpec::RMSPROP:
      RETURN_IF_ERROR(zeroed(d.square_avg));
      if (o.momentum() > 0) RETURN_IF_ERROR(zeroed(d.momentum));
      if (o.centered()) RETURN_IF_ERROR(zeroed(d.grad_avg));
      break;
    default:  // Adam, AdamW, LAMB
      RETURN_IF_ERROR(zeroed(d.adam_m));
      RETURN_IF_ERROR(zeroed(d.adam_v));
      break;
  }
  if (!NeedsTensorNorms(o)) return absl::OkStatus();
  std::vector<int64_t> pieces, tensor_pieces;
  gpu::PieceTableArrays(whole_layout_, &pieces, &tensor_pieces);
  // 64-bit values in float buffers: two floats each.
  auto upload = [](DeviceFloats& buffer,
                   const std::vector<int64_t>& v) -> absl::Status {
    RETURN_IF_ERROR(buffer.Reserve(
        2 * std::max<int64_t>(1, static_cast<int64_t>(v.size()))));
    return CopyToDevice(buffer.data(), v.data(), v.size() * sizeof(int64_t),
                        "uploading the parameter tensors' pieces");
  };
  RETURN_IF_ERROR(upload(d.pieces, pieces));
  RETURN_IF_ERROR(upload(d.tensor_pieces, tensor_pieces));
  RETURN_IF_ERROR(d.piece_sums.Reserve(4 * (whole_layout_.num_pieces + 1)));
  return d.tensor_totals.Reserve(4 * (int64_t{whole_layout_.num_tensors} + 1));
}

absl::Status GpuEngine::OptimizerStep(Device& d, double lr) {
  const int64_t n = d.model->flat_size();
  const cudaStream_t s = d.context->stream();
  if (nccl_ != nullptr) {
    RETURN_IF_ERROR(StreamWait(s, d.reduced, "the optimizer"));
  }
  if (TotalReplicas() > 1) {
    RETURN_IF_ERROR(
        gpu::ScaleInPlace(d.model->grads(), n, 1.0f / TotalReplicas(), s));
  }
  // Read with the loss after the step: a NaN or infinity anywhere makes it
  // non-finite (see Update); and the norm before clipping.
  RETURN_IF_ERROR(SumSquaresAsync(
      d.model->grads(), n, d.result.data() + 1, d.reduce_workspace.data(),
      d.reduce_workspace.capacity() * sizeof(float), s));
  RETURN_IF_ERROR(Clip(d));
  const OptimizerSpec& o = spec_.optimizer();
  float* p = d.model->params();
  const float* g = d.model->grads();
  if (NeedsTensorNorms(o)) {
    gpu::PieceTable table;
    table.pieces = reinterpret_cast<const int64_t*>(d.pieces.data());
    table.tensor_pieces =
        reinterpret_cast<const int64_t*>(d.tensor_pieces.data());
    table.num_pieces = whole_layout_.num_pieces;
    table.num_tensors = whole_layout_.num_tensors;
    table.sums = reinterpret_cast<double*>(d.piece_sums.data());
    table.totals = reinterpret_cast<double*>(d.tensor_totals.data());
    if (o.kind() == OptimizerSpec::LAMB) {
      return gpu::LambStep(p, g, d.adam_m.data(), d.adam_v.data(), lr,
                           adam_steps_, LambOptionsOf(o), table, s);
    }
    return gpu::LarsStep(p, g, d.momentum.data(), lr, LarsOptionsOf(o), table,
                         s);
  }
  // The elementwise rules, one launch per run of tensors with the same
  // weight decay (one run unless no_decay_bias_and_norm).
  for (const DecayRun& r : decay_runs_) {
    const int64_t len = r.end - r.begin;
    const auto at = [&](const DeviceFloats& b) {
      return b.data() != nullptr ? b.data() + r.begin : nullptr;
    };
    switch (o.kind()) {
      case OptimizerSpec::SGD: {
        SgdOptions so = SgdOptionsOf(o);
        if (!r.decay) so.weight_decay = 0;
        RETURN_IF_ERROR(gpu::SgdStep(p + r.begin, g + r.begin, at(d.momentum),
                                     len, lr, so, s));
        break;
      }
      case OptimizerSpec::RMSPROP: {
        RmspropOptions ro = RmspropOptionsOf(o);
        if (!r.decay) ro.weight_decay = 0;
        RETURN_IF_ERROR(gpu::RmspropStep(p + r.begin, g + r.begin,
                                         at(d.square_avg), at(d.momentum),
                                         at(d.grad_avg), len, lr, ro, s));
        break;
      }
      default: {  // Adam, AdamW
        AdamOptions ao = AdamOptionsOf(o);
        if (!r.decay) ao.weight_decay = 0;
        RETURN_IF_ERROR(gpu::AdamStep(p + r.begin, g + r.begin, at(d.adam_m),
                                      at(d.adam_v), len, lr, adam_steps_, ao,
                                      s));
        break;
      }
    }
  }
  return absl::OkStatus();
}

// clip_grad_value, then clip_grad_norm on the gradient that leaves (its
// squares summed again into d.result[5] after value clipping), as the CPU
// engine clips.
absl::Status GpuEngine::Clip(Device& d) {
  const OptimizerSpec& o = spec_.optimizer();
  const int64_t n = d.model->flat_size();
  const cudaStream_t s = d.context->stream();
  const float* squares = d.result.data() + 1;
  if (o.clip_grad_value() > 0) {
    RETURN_IF_ERROR(
        gpu::ClampInPlace(d.model->grads(), n, o.clip_grad_value(), s));
    if (o.clip_grad_norm() > 0) {
      RETURN_IF_ERROR(SumSquaresAsync(
          d.model->grads(), n, d.result.data() + 5, d.reduce_workspace.data(),
          d.reduce_workspace.capacity() * sizeof(float), s));
      squares = d.result.data() + 5;
    }
  }
  if (o.clip_grad_norm() <= 0) return absl::OkStatus();
  return gpu::ClipToNormInPlace(d.model->grads(), n, squares,
                                o.clip_grad_norm(), s);
}

}  // namespace gpu_engine
}  // namespace cohort
