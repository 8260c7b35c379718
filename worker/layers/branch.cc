#include "worker/layers/branch.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/broadcast.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/elementwise.h"
#include "worker/layers/layer_fusion.h"

namespace cohort {
namespace {

// The batch-inner shape of per-sample `s` for a batch of n (layer.h).
Shape Batched(const Shape& s, int64_t n) {
  if (s.size() == 1) return {n, s[0]};
  Shape b = {s[0], n};
  b.insert(b.end(), s.begin() + 1, s.end());
  return b;
}

const char* CombineName(BranchCombine c) {
  switch (c) {
    case BranchCombine::kSum:
      return "sum";
    case BranchCombine::kMul:
      return "mul";
    default:
      return "concat";
  }
}

// What a path that does not combine broke.
const char* CombineRule(BranchCombine c) {
  switch (c) {
    case BranchCombine::kSum:
      return "; summed paths must give the same shape";
    case BranchCombine::kMul:
      return "; multiplied paths must give the same shape, or [C, 1, 1] to "
             "scale [C, H, W]";
    default:
      return "; concatenated paths must agree in all but the channels";
  }
}

}  // namespace

template <typename T>
Branch<T>::Branch(std::vector<Path> paths, BranchCombine combine)
    : paths_(std::move(paths)), combine_(combine), state_(paths_.size()) {}

template <typename T>
std::string Branch<T>::Name() const {
  return absl::StrCat("branch(", CombineName(combine_), ", ", paths_.size(),
                      " paths)");
}

template <typename T>
absl::StatusOr<Shape> Branch<T>::Configure(const Shape& in) {
  if (paths_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": needs at least one path"));
  }
  in_shape_ = in;
  for (size_t p = 0; p < paths_.size(); ++p) {
    Shape s = in;
    for (size_t i = 0; i < paths_[p].size(); ++i) {
      absl::StatusOr<Shape> next = paths_[p][i]->Configure(s);
      if (!next.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            Name(), " path ", p, " layer ", i, ": ", next.status().message()));
      }
      s = *next;
    }
    State& st = state_[p];
    st.acts.resize(paths_[p].size());
    st.grads.resize(paths_[p].size());
    st.out = s;
    st.skipped = FuseActivations(paths_[p]);
    st.trace_names.assign(paths_[p].size(), std::string());
    st.last = paths_[p].size();
    while (st.last > 0 && st.skipped[st.last - 1]) --st.last;
  }
  const Shape& first = state_[0].out;
  Shape out = first;  // MUL: the largest output so far, path ref's
  size_t ref = 0;
  for (size_t p = 1; p < paths_.size(); ++p) {
    const Shape& s = state_[p].out;
    bool fits, grown = false;
    switch (combine_) {
      case BranchCombine::kSum:
        fits = s == first;
        break;
      case BranchCombine::kMul:
        fits = FitsProduct(s, &out, &grown);
        if (grown) ref = p;
        break;
      default:
        fits = s.size() == first.size() &&
               std::equal(s.begin() + 1, s.end(), first.begin() + 1);
        if (fits) out[0] += s[0];
    }
    if (!fits) {
      return absl::InvalidArgumentError(absl::StrCat(
          Name(), ": path ", p, " gives ", ShapeString(s), " but path ", ref,
          " gives ", ShapeString(state_[ref].out), CombineRule(combine_)));
    }
  }
  for (State& st : state_) st.gate = st.out != out;
  plane_ = out.size() == 3 ? out[1] * out[2] : 1;
  out_shape_ = out;
  return out;
}

template <typename T>
std::vector<ParamDecl> Branch<T>::Params() const {
  std::vector<ParamDecl> all;
  for (size_t p = 0; p < paths_.size(); ++p) {
    for (size_t i = 0; i < paths_[p].size(); ++i) {
      for (ParamDecl d : paths_[p][i]->Params()) {
        d.name = absl::StrCat("paths.", p, ".", i, ".", d.name);
        all.push_back(std::move(d));
      }
    }
  }
  return all;
}

template <typename T>
void Branch<T>::Bind(std::vector<BasicTensor<T>> values,
                     std::vector<BasicTensor<T>> grads) {
  CHECK_EQ(values.size(), grads.size());
  size_t next = 0;
  for (Path& path : paths_) {
    for (std::unique_ptr<Layer<T>>& l : path) {
      const size_t n = l->Params().size();
      CHECK_LE(next + n, values.size()) << Name() << ": too few views bound";
      std::vector<BasicTensor<T>> v, g;
      for (size_t i = next; i < next + n; ++i) {
        v.push_back(std::move(values[i]));
        g.push_back(std::move(grads[i]));
      }
      l->Bind(std::move(v), std::move(g));
      next += n;
    }
  }
  CHECK_EQ(next, values.size()) << Name() << ": too many views bound";
}

template <typename T>
std::vector<BasicTensor<T>*> Branch<T>::Buffers() {
  std::vector<BasicTensor<T>*> all;
  for (Path& path : paths_) {
    for (std::unique_ptr<Layer<T>>& l : path) {
      for (BasicTensor<T>* b : l->Buffers()) all.push_back(b);
    }
  }
  return all;
}

template <typename T>
std::vector<std::string> Branch<T>::BufferNames() const {
  std::vector<std::string> all;
  for (size_t p = 0; p < paths_.size(); ++p) {
    for (size_t i = 0; i < paths_[p].size(); ++i) {
      for (const std::string& b : paths_[p][i]->BufferNames()) {
        all.push_back(absl::StrCat("paths.", p, ".", i, ".", b));
      }
    }
  }
  return all;
}

template <typename T>
absl::Status Branch<T>::InputError() const {
  for (const Path& path : paths_) {
    for (const std::unique_ptr<Layer<T>>& l : path) {
      RETURN_IF_ERROR(l->InputError());
    }
  }
  return absl::OkStatus();
}

template <typename T>
void Branch<T>::CollectSparseTables(std::vector<SparseTable*>* out) {
  for (Path& path : paths_) {
    for (std::unique_ptr<Layer<T>>& l : path) l->CollectSparseTables(out);
  }
}

template <typename T>
void Branch<T>::SeedRandom(uint64_t seed) {
  // Distinct streams per layer, so that two dropouts draw different masks.
  uint64_t k = 0;
  for (Path& path : paths_) {
    for (std::unique_ptr<Layer<T>>& l : path) {
      l->SeedRandom(seed + 0x9E3779B97F4A7C15ull * ++k);
    }
  }
}

template <typename T>
void Branch<T>::TraceSublayers(LayerTrace* trace, const std::string& prefix) {
  trace_ = trace;
  for (size_t p = 0; p < paths_.size(); ++p) {
    for (size_t i = 0; i < paths_[p].size(); ++i) {
      const std::string position = absl::StrCat(prefix, ".paths.", p, ".", i);
      state_[p].trace_names[i] =
          trace != nullptr ? absl::StrCat(position, " ", paths_[p][i]->Name())
                           : std::string();
      paths_[p][i]->TraceSublayers(trace, position);
    }
  }
}

template <typename T>
const BasicTensor<T>& Branch<T>::Output(size_t p,
                                        const BasicTensor<T>& in) const {
  return paths_[p].empty() ? in : state_[p].acts[state_[p].last - 1];
}

template <typename T>
void Branch<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                        Mode mode) {
  const int64_t n = in_shape_.size() == 1 ? in.dim(0) : in.dim(1);
  for (size_t p = 0; p < paths_.size(); ++p) {
    const BasicTensor<T>* x = &in;
    for (size_t i = 0; i < paths_[p].size(); ++i) {
      if (state_[p].skipped[i]) continue;
      TraceLayerCall(
          mode == Mode::kTrain ? trace_ : nullptr, state_[p].trace_names[i],
          /*backward=*/false,
          [&] { paths_[p][i]->Forward(*x, &state_[p].acts[i], mode); });
      x = &state_[p].acts[i];
    }
  }
  EnsureShape(out, Batched(out_shape_, n));
  output_ = out;
  T* y = out->data();
  if (combine_ == BranchCombine::kSum) {
    Sum(in, out);
  } else if (combine_ == BranchCombine::kMul) {
    Multiply(in, out);
  } else if (out_shape_.size() == 1) {
    // {N, F}: each path's features are a column block of every row.
    const int64_t f = out_shape_[0];
    int64_t col = 0;
    for (size_t p = 0; p < paths_.size(); ++p) {
      const int64_t fp = state_[p].out[0];
      const T* src = Output(p, in).data();
      for (int64_t r = 0; r < n; ++r) {
        std::memcpy(y + r * f + col, src + r * fp, fp * sizeof(T));
      }
      col += fp;
    }
  } else {
    // {C, N, ...}: the channels are outermost, each path's output one block.
    for (size_t p = 0; p < paths_.size(); ++p) {
      const BasicTensor<T>& o = Output(p, in);
      std::memcpy(y, o.data(), o.size() * sizeof(T));
      y += o.size();
    }
  }
  input_ = mode == Mode::kTrain ? &in : nullptr;
}

// y = p0 + p1 + ..., in order, the last addition applying the fused
// activation.
template <typename T>
void Branch<T>::Sum(const BasicTensor<T>& in, BasicTensor<T>* y) const {
  const size_t last = paths_.size() - 1;
  if (last == 0) {
    const BasicTensor<T>& only = Output(0, in);
    std::memcpy(y->data(), only.data(), only.size() * sizeof(T));
    return;
  }
  for (size_t p = 1; p <= last; ++p) {
    const T* a = p == 1 ? Output(0, in).data() : y->data();
    AddActivated(a, Output(p, in).data(),
                 p == last ? fused_ : FusedActivation::kNone, y->data(),
                 y->size());
  }
}

template <typename T>
bool Branch<T>::FuseActivation(FusedActivation act) {
  if (combine_ != BranchCombine::kSum || paths_.size() < 2) return false;
  fused_ = act;
  return true;
}

// dLoss/d(the sum) from dLoss/d(the output): grad_out itself, or through
// the fused activation.
template <typename T>
const BasicTensor<T>& Branch<T>::SumGradient(const BasicTensor<T>& grad_out) {
  if (fused_ == FusedActivation::kNone) return grad_out;
  EnsureShape(&activation_grad_, grad_out.shape());
  ActivationGradFromOutput(output_->data(), grad_out.data(), fused_,
                           activation_grad_.data(), grad_out.size());
  return activation_grad_;
}

template <typename T>
void Branch<T>::Multiply(const BasicTensor<T>& in, BasicTensor<T>* y) const {
  // Start from a full-size output, which the gates then scale in place.
  size_t base = 0;
  while (state_[base].gate) ++base;
  const BasicTensor<T>& b = Output(base, in);
  std::memcpy(y->data(), b.data(), b.size() * sizeof(T));
  for (size_t p = 0; p < paths_.size(); ++p) {
    if (p == base) continue;
    const BasicTensor<T>& o = Output(p, in);
    if (state_[p].gate) {
      ScalePlanesInPlace(o.data(), y->data(), o.size(), plane_);
    } else {
      MulInPlace(o.data(), y->data(), y->size());
    }
  }
}

template <typename T>
void Branch<T>::ProductGradient(size_t p, const BasicTensor<T>& in,
                                const BasicTensor<T>& grad_out,
                                BasicTensor<T>* g) {
  // The product of the others, not y / out_p: a path's output may be 0.
  BasicTensor<T>* full = state_[p].gate ? &product_ : g;
  EnsureShape(full, grad_out.shape());
  std::memcpy(full->data(), grad_out.data(), grad_out.size() * sizeof(T));
  for (size_t q = 0; q < paths_.size(); ++q) {
    if (q == p) continue;
    const BasicTensor<T>& o = Output(q, in);
    if (state_[q].gate) {
      ScalePlanesInPlace(o.data(), full->data(), o.size(), plane_);
    } else {
      MulInPlace(o.data(), full->data(), full->size());
    }
  }
  if (state_[p].gate) {
    // A gate value scaled a whole plane: its gradient sums over the plane.
    EnsureShape(g, Batched(state_[p].out, grad_out.dim(1)));
    SumPlanes(full->data(), g->data(), g->size(), plane_);
  }
}

template <typename T>
void Branch<T>::Backward(const BasicTensor<T>& grad_out,
                         BasicTensor<T>* grad_in) {
  CHECK(input_ != nullptr) << Name() << ": Backward without a kTrain Forward";
  const BasicTensor<T>& in = *input_;
  const BasicTensor<T>& sum_grad = SumGradient(grad_out);
  const int64_t n = out_shape_.size() == 1 ? grad_out.dim(0) : grad_out.dim(1);
  bool first = true;   // grad_in not yet written
  int64_t offset = 0;  // CONCAT: the path's channel block or column
  for (size_t p = 0; p < paths_.size(); ++p) {
    State& st = state_[p];
    // dLoss/d(path output).
    const BasicTensor<T>* g = &sum_grad;
    BasicTensor<T> slice;
    if (combine_ == BranchCombine::kConcat && paths_.size() > 1) {
      BasicTensor<T>& part = paths_[p].empty() ? st.grad_in : st.grads.back();
      EnsureShape(&part, Batched(st.out, n));
      if (out_shape_.size() == 1) {
        const int64_t f = out_shape_[0], fp = st.out[0];
        for (int64_t r = 0; r < n; ++r) {
          std::memcpy(part.data() + r * fp, grad_out.data() + r * f + offset,
                      fp * sizeof(T));
        }
        offset += fp;
      } else {
        std::memcpy(part.data(), grad_out.data() + offset,
                    part.size() * sizeof(T));
        offset += part.size();
      }
      g = &part;
    } else if (combine_ == BranchCombine::kMul && paths_.size() > 1) {
      BasicTensor<T>& part = paths_[p].empty() ? st.grad_in : st.grads.back();
      ProductGradient(p, in, grad_out, &part);
      g = &part;
    }
    // Through the path's layers, last to first.
    const size_t len = paths_[p].size();
    for (size_t i = len; i-- > 0;) {
      if (st.skipped[i]) continue;
      const bool to_input = i == 0;
      BasicTensor<T>* gi = nullptr;
      if (!to_input) {
        gi = &st.grads[i - 1];
      } else if (grad_in != nullptr) {
        gi = first ? grad_in : &st.grad_in;
      }
      TraceLayerCall(trace_, st.trace_names[i], /*backward=*/true,
                     [&] { paths_[p][i]->Backward(*g, gi); });
      if (!to_input) g = gi;
    }
    if (grad_in == nullptr) continue;
    // This path's dLoss/dIn: in grad_in already (first path with layers),
    // in st.grad_in, or g itself (empty path).
    const BasicTensor<T>* mine = len == 0 ? g : &st.grad_in;
    if (len > 0 && first) {
      first = false;
      continue;
    }
    if (first) {
      EnsureShape(grad_in, in.shape());
      std::memcpy(grad_in->data(), mine->data(), mine->size() * sizeof(T));
      first = false;
    } else {
      AddInPlace(mine->data(), grad_in->data(), grad_in->size());
    }
  }
}

template class Branch<float>;
template class Branch<double>;

}  // namespace cohort
