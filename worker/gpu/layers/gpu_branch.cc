#include "worker/gpu/layers/gpu_branch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/broadcast.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "kernels/cuda/branch_ops.h"
#include "kernels/cuda/cuda_status.h"
#include "worker/gpu/layers/gpu_layer_util.h"

namespace cohort {

using gpu_layers::kOne;

GpuBranch::GpuBranch(std::vector<Path> paths, BranchSpec::Combine combine)
    : paths_(std::move(paths)), combine_(combine), state_(paths_.size()) {}

std::string GpuBranch::Name() const {
  const char* name = combine_ == BranchSpec::SUM   ? "sum"
                     : combine_ == BranchSpec::MUL ? "mul"
                                                   : "concat";
  return absl::StrCat("branch(", name, ", ", paths_.size(), " paths)");
}

absl::StatusOr<Shape> GpuBranch::Configure(const Shape& in) {
  if (paths_.empty() || in.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": needs a path and an input"));
  }
  in_size_ = NumElements(in);
  Shape first;
  Shape out;
  for (size_t p = 0; p < paths_.size(); ++p) {
    State& st = state_[p];
    Shape s = in;
    st.sizes.clear();
    st.widest = in_size_;
    for (std::unique_ptr<GpuLayer>& l : paths_[p]) {
      ASSIGN_OR_RETURN(s, l->Configure(s));
      st.sizes.push_back(NumElements(s));
      st.widest = std::max(st.widest, st.sizes.back());
    }
    st.acts.resize(paths_[p].size());
    st.out_size = NumElements(s);
    st.channels = s[0];
    if (p == 0) {
      first = out = s;
      continue;
    }
    bool fits;
    if (combine_ == BranchSpec::SUM) {
      fits = s == first;
    } else if (combine_ == BranchSpec::MUL) {
      fits = FitsProduct(s, &out);
    } else {
      fits = s.size() == first.size() &&
             std::equal(s.begin() + 1, s.end(), first.begin() + 1);
      if (fits) out[0] += s[0];
    }
    if (!fits) {
      return absl::InvalidArgumentError(
          absl::StrCat(Name(), ": path ", p, " gives ", ShapeString(s),
                       " but path 0 gives ", ShapeString(first)));
    }
  }
  out_size_ = NumElements(out);
  for (State& st : state_) {
    st.gate = combine_ == BranchSpec::MUL && st.out_size != out_size_;
  }
  plane_ = out_size_ / out[0];
  return out;
}

std::vector<int64_t> GpuBranch::ParamSizes() const {
  std::vector<int64_t> sizes;
  for (const Path& path : paths_) {
    for (const std::unique_ptr<GpuLayer>& l : path) {
      for (int64_t s : l->ParamSizes()) sizes.push_back(s);
    }
  }
  return sizes;
}

void GpuBranch::Bind(const std::vector<float*>& v,
                     const std::vector<float*>& g) {
  size_t i = 0;
  for (Path& path : paths_) {
    for (std::unique_ptr<GpuLayer>& l : path) {
      const size_t k = l->ParamSizes().size();
      l->Bind(std::vector<float*>(v.begin() + i, v.begin() + i + k),
              std::vector<float*>(g.begin() + i, g.begin() + i + k));
      i += k;
    }
  }
}

std::vector<std::pair<float*, int64_t>> GpuBranch::Buffers() {
  std::vector<std::pair<float*, int64_t>> all;
  for (Path& path : paths_) {
    for (std::unique_ptr<GpuLayer>& l : path) {
      for (auto b : l->Buffers()) all.push_back(b);
    }
  }
  return all;
}

void GpuBranch::SeedRandom(uint64_t seed) {
  // As the CPU block: a distinct stream per layer.
  uint64_t k = 0;
  for (Path& path : paths_) {
    for (std::unique_ptr<GpuLayer>& l : path) {
      l->SeedRandom(seed + 0x9E3779B97F4A7C15ull * ++k);
    }
  }
}

const float* GpuBranch::Output(size_t p, const float* in) const {
  return paths_[p].empty() ? in : state_[p].acts.back().data();
}

absl::Status GpuBranch::Forward(GpuContext& c, const float* in, float* out,
                                int64_t n, Mode mode) {
  n_ = n;
  in_ = in;
  for (size_t p = 0; p < paths_.size(); ++p) {
    State& st = state_[p];
    const float* x = in;
    for (size_t i = 0; i < paths_[p].size(); ++i) {
      RETURN_IF_ERROR(st.acts[i].Reserve(n * st.sizes[i]));
      RETURN_IF_ERROR(paths_[p][i]->Forward(c, x, st.acts[i].data(), n, mode));
      x = st.acts[i].data();
    }
  }
  if (combine_ == BranchSpec::MUL) return Multiply(c, in, out, n);
  if (combine_ == BranchSpec::SUM) {
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(out, Output(0, in), n * out_size_ * sizeof(float),
                        cudaMemcpyDeviceToDevice, c.stream()),
        "branch sum"));
    for (size_t p = 1; p < paths_.size(); ++p) {
      RETURN_IF_ERROR(CublasStatus(cublasSaxpy(c.cublas(), n * out_size_, &kOne,
                                               Output(p, in), 1, out, 1),
                                   "branch sum"));
    }
    return absl::OkStatus();
  }
  // Each sample's output is the paths' channel blocks one after another.
  int64_t offset = 0;
  for (size_t p = 0; p < paths_.size(); ++p) {
    const int64_t width = state_[p].out_size * sizeof(float);
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpy2DAsync(out + offset, out_size_ * sizeof(float),
                                     Output(p, in), width, width, n,
                                     cudaMemcpyDeviceToDevice, c.stream()),
                   "branch concatenation"));
    offset += state_[p].out_size;
  }
  return absl::OkStatus();
}

absl::Status GpuBranch::MultiplyBy(GpuContext& c, size_t q, const float* in,
                                   float* y, int64_t n) {
  if (state_[q].gate) {
    return gpu::ScalePlanes(Output(q, in), y, n * state_[q].out_size, plane_,
                            c.stream());
  }
  return gpu::MultiplyInPlace(Output(q, in), y, n * out_size_, c.stream());
}

absl::Status GpuBranch::Multiply(GpuContext& c, const float* in, float* out,
                                 int64_t n) {
  // Start from a full-size output, which the gates then scale in place.
  size_t base = 0;
  while (state_[base].gate) ++base;
  RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(out, Output(base, in), n * out_size_ * sizeof(float),
                      cudaMemcpyDeviceToDevice, c.stream()),
      "branch product"));
  for (size_t p = 0; p < paths_.size(); ++p) {
    if (p != base) RETURN_IF_ERROR(MultiplyBy(c, p, in, out, n));
  }
  return absl::OkStatus();
}

absl::Status GpuBranch::ProductGradient(GpuContext& c, size_t p,
                                        const float* dy) {
  // The product of the others, not y / out_p: a path's output may be 0.
  State& st = state_[p];
  RETURN_IF_ERROR(st.g_out.Reserve(n_ * st.out_size));
  float* full = st.g_out.data();
  if (st.gate) {
    RETURN_IF_ERROR(product_.Reserve(n_ * out_size_));
    full = product_.data();
  }
  RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(full, dy, n_ * out_size_ * sizeof(float),
                                 cudaMemcpyDeviceToDevice, c.stream()),
                 "branch product gradient"));
  for (size_t q = 0; q < paths_.size(); ++q) {
    if (q != p) RETURN_IF_ERROR(MultiplyBy(c, q, in_, full, n_));
  }
  if (!st.gate) return absl::OkStatus();
  // A gate value scaled a whole plane: its gradient sums over the plane.
  return gpu::SumPlanes(full, st.g_out.data(), n_ * st.out_size, plane_,
                        c.stream());
}

absl::Status GpuBranch::Backward(GpuContext& c, const float* dy, float* dx) {
  const int64_t n = n_;
  bool first = true;  // dx not yet written
  int64_t offset = 0;
  for (size_t p = 0; p < paths_.size(); ++p) {
    State& st = state_[p];
    const float* g = dy;
    if (combine_ == BranchSpec::MUL && paths_.size() > 1) {
      RETURN_IF_ERROR(ProductGradient(c, p, dy));
      g = st.g_out.data();
    } else if (combine_ != BranchSpec::SUM && paths_.size() > 1) {
      const int64_t width = st.out_size * sizeof(float);
      RETURN_IF_ERROR(st.g_out.Reserve(n * st.out_size));
      RETURN_IF_ERROR(
          CudaStatus(cudaMemcpy2DAsync(st.g_out.data(), width, dy + offset,
                                       out_size_ * sizeof(float), width, n,
                                       cudaMemcpyDeviceToDevice, c.stream()),
                     "branch gradient split"));
      offset += st.out_size;
      g = st.g_out.data();
    }
    RETURN_IF_ERROR(st.g_a.Reserve(n * st.widest));
    RETURN_IF_ERROR(st.g_b.Reserve(n * st.widest));
    RETURN_IF_ERROR(st.g_in.Reserve(n * in_size_));
    const size_t len = paths_[p].size();
    for (size_t i = len; i-- > 0;) {
      float* target;
      if (i > 0) {
        target = g == st.g_a.data() ? st.g_b.data() : st.g_a.data();
      } else if (dx == nullptr) {
        target = nullptr;
      } else {
        target = first ? dx : st.g_in.data();
      }
      RETURN_IF_ERROR(paths_[p][i]->Backward(c, g, target));
      g = target;
    }
    if (dx == nullptr) continue;
    if (len > 0 && first) {
      first = false;
      continue;
    }
    const float* mine = len == 0 ? g : st.g_in.data();
    if (first) {
      RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyAsync(dx, mine, n * in_size_ * sizeof(float),
                                     cudaMemcpyDeviceToDevice, c.stream()),
                     "branch input gradient"));
      first = false;
    } else {
      RETURN_IF_ERROR(CublasStatus(
          cublasSaxpy(c.cublas(), n * in_size_, &kOne, mine, 1, dx, 1),
          "branch input gradient"));
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort
