// The GPU engine's loss (gpu_engine_impl.h): every LossKind of the job, on
// class labels or on float targets, with the gradient the CPU engine's
// Objective::Loss (worker/objective.cc) computes.
#include <cstdint>

#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/elementwise_loss.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/sequence_ops.h"
#include "worker/gpu/gpu_engine_impl.h"

namespace cohort {
namespace gpu_engine {
namespace {

CudaElementLoss ElementKind(LossKind kind) {
  switch (kind) {
    case L1:
      return CudaElementLoss::kL1;
    case HUBER:
      return CudaElementLoss::kHuber;
    case BCE_WITH_LOGITS:
      return CudaElementLoss::kBce;
    default:
      return CudaElementLoss::kMse;
  }
}

}  // namespace

// The loss into d.result[0] and, for class labels, the count of rows whose
// first maximal logit is the label into d.result[2..3] (int64, cleared
// first; it stays 0 for float targets, as on the CPU).
absl::Status GpuEngine::LossOf(Device& d, const Slot& slot, bool gradient) {
  const cudaStream_t s = d.context->stream();
  RETURN_IF_ERROR(
      CudaStatus(cudaMemsetAsync(d.result.data(), 0, 4 * sizeof(float), s),
                 "clearing the loss"));
  if (sequence_positions_ > 0) return SequenceLossOf(d, slot, gradient);
  if (spec_.loss() != CROSS_ENTROPY) {
    return ElementwiseLossOf(d, slot, gradient);
  }
  CudaCrossEntropyBuffers b;
  b.logits = d.model->output();
  b.labels = As<int32_t>(slot.labels);
  b.loss = d.result.data();
  b.grad = gradient ? d.grad_out.data() : nullptr;
  b.correct = reinterpret_cast<int64_t*>(d.result.data() + 2);
  b.workspace = d.workspace.data();
  b.workspace_bytes = d.workspace.capacity() * sizeof(float);
  b.label_smoothing = spec_.label_smoothing();
  return SoftmaxCrossEntropyAsync(b, slot.n, out_size_, s);
}

// The sequence cross-entropy: the model's NCHW logits
// {n, V, L} against the float token targets {n, L}, a cross-entropy row
// per position (the classes L apart), the loss the mean over the n * L
// positions with the job's label smoothing, and d.result[2..3] the number
// of positions whose first maximal logit is the target token. A target
// outside [0, V) gives that position no loss and no gradient (the data set
// validates ids when it opens its files).
absl::Status GpuEngine::SequenceLossOf(Device& d, const Slot& slot,
                                       bool gradient) {
  const cudaStream_t s = d.context->stream();
  const int64_t rows = slot.n * sequence_positions_;
  int32_t* labels = As<int32_t>(d.sequence_labels);
  RETURN_IF_ERROR(
      gpu::FloatTargetsToLabels(slot.targets.data(), labels, rows, s));
  CudaCrossEntropyBuffers b;
  b.logits = d.model->output();
  b.labels = labels;
  b.loss = d.result.data();
  b.grad = gradient ? d.grad_out.data() : nullptr;
  b.correct = reinterpret_cast<int64_t*>(d.result.data() + 2);
  b.workspace = d.workspace.data();
  b.workspace_bytes = d.workspace.capacity() * sizeof(float);
  b.label_smoothing = spec_.label_smoothing();
  b.positions = sequence_positions_;
  return SoftmaxCrossEntropyAsync(b, rows, out_size_ / sequence_positions_, s);
}

// MSE, L1, Huber or BCE with logits over every output element, against the
// float targets or against the one-hot rows of the class labels (read in
// place by the kernel).
absl::Status GpuEngine::ElementwiseLossOf(Device& d, const Slot& slot,
                                          bool gradient) {
  const cudaStream_t s = d.context->stream();
  const bool floats = target_size_ > 0;
  if (!floats) {
    // The CPU counts top-1 hits of class data under any loss. The fused
    // cross-entropy kernel counts them with the CPU's tie rule; its loss
    // goes to scratch (d.result[4]) and it writes no gradient. One more pass
    // over [n, classes] logits, small beside the model's forward.
    CudaCrossEntropyBuffers count;
    count.logits = d.model->output();
    count.labels = As<int32_t>(slot.labels);
    count.loss = d.result.data() + 4;
    count.correct = reinterpret_cast<int64_t*>(d.result.data() + 2);
    count.workspace = d.workspace.data();
    count.workspace_bytes = d.workspace.capacity() * sizeof(float);
    RETURN_IF_ERROR(SoftmaxCrossEntropyAsync(count, slot.n, out_size_, s));
  }
  CudaElementwiseLossBuffers b;
  b.pred = d.model->output();
  b.target = floats ? slot.targets.data() : nullptr;
  b.labels = floats ? nullptr : As<int32_t>(slot.labels);
  b.row = out_size_;
  b.loss = d.result.data();
  b.grad = gradient ? d.grad_out.data() : nullptr;
  b.workspace = d.element_workspace.data();
  b.workspace_bytes = d.element_workspace.capacity() * sizeof(float);
  // As Objective: a Huber delta left at 0 means 1 (PyTorch's default).
  const float delta = spec_.huber_delta() > 0 ? spec_.huber_delta() : 1.0f;
  return ElementwiseLossAsync(ElementKind(spec_.loss()), delta, b,
                              slot.n * out_size_, s);
}

}  // namespace gpu_engine
}  // namespace cohort
