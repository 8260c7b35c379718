// Dense host tensors of float32 (training) or float64 (gradient checks).
//
// A tensor either owns 64-byte-aligned storage or is a view into memory
// owned by someone else (model parameters and gradients are views into one
// flat buffer each, so that the distributed layer can reduce them in
// buckets). Tensors are move-only: a copy on the hot path is always a bug,
// so copies are explicit (`Clone`, `CopyFrom`).
//
// Thread safety: none; a tensor belongs to one replica's thread at a time.
//
// Activation layouts used by the engine (see worker/layers/layer.h):
//   dense:   {N, F}
//   spatial: {C, N, H, W} (2-D) and {C, N, L} (1-D) -- "batch-inner", so that
//            a convolution over the whole batch is one large matrix product
//            and per-channel statistics are contiguous.
#ifndef COHORT_COMMON_TENSOR_H_
#define COHORT_COMMON_TENSOR_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace cohort {

using Shape = std::vector<int64_t>;

// Number of elements of `shape` (1 for a scalar shape {}).
int64_t NumElements(const Shape& shape);

// "[2, 3, 4]", for messages.
std::string ShapeString(const Shape& shape);

template <typename T>
class BasicTensor {
 public:
  BasicTensor() = default;
  // Owning, zero-filled.
  explicit BasicTensor(Shape shape) { Resize(std::move(shape)); }

  // A view of `data` (not owned; must outlive the view).
  static BasicTensor View(T* data, Shape shape) {
    BasicTensor t;
    t.shape_ = std::move(shape);
    t.size_ = NumElements(t.shape_);
    t.data_ = data;
    return t;
  }

  BasicTensor(BasicTensor&& other) noexcept { *this = std::move(other); }
  BasicTensor& operator=(BasicTensor&& other) noexcept {
    storage_ = std::move(other.storage_);
    capacity_ = other.capacity_;
    shape_ = std::move(other.shape_);
    size_ = other.size_;
    data_ = other.data_;
    other.capacity_ = 0;
    other.size_ = 0;
    other.data_ = nullptr;
    other.shape_.clear();
    return *this;
  }
  BasicTensor(const BasicTensor&) = delete;
  BasicTensor& operator=(const BasicTensor&) = delete;

  // Sets the shape. An owning tensor keeps its storage when it is large
  // enough, so layers reuse their buffers from step to step; new elements
  // are zero, kept ones are unspecified. A view may only shrink or keep its
  // size.
  void Resize(Shape shape);

  // Deep copies.
  BasicTensor Clone() const;
  void CopyFrom(const BasicTensor& other);

  void Fill(T value);
  void SetZero() { Fill(T(0)); }

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t size() const { return size_; }
  bool is_view() const { return data_ != nullptr && storage_ == nullptr; }

  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](int64_t i) { return data_[i]; }
  const T& operator[](int64_t i) const { return data_[i]; }
  absl::Span<T> span() { return absl::Span<T>(data_, size_); }
  absl::Span<const T> span() const { return absl::Span<const T>(data_, size_); }

 private:
  struct FreeDeleter {
    size_t bytes = 0;
    void operator()(T* p) const;
  };
  std::unique_ptr<T, FreeDeleter> storage_;
  int64_t capacity_ = 0;
  Shape shape_;
  int64_t size_ = 0;
  T* data_ = nullptr;
};

using Tensor = BasicTensor<float>;
using TensorD = BasicTensor<double>;

extern template class BasicTensor<float>;
extern template class BasicTensor<double>;

}  // namespace cohort

#endif  // COHORT_COMMON_TENSOR_H_
