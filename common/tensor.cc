#include "common/tensor.h"

#include <algorithm>
#include <new>

#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/zeroed_memory.h"

namespace cohort {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const Shape& shape) {
  return "[" + absl::StrJoin(shape, ", ") + "]";
}

template <typename T>
void BasicTensor<T>::Resize(Shape shape) {
  for (int64_t d : shape) CHECK_GE(d, 0) << "negative dimension";
  const int64_t n = NumElements(shape);
  shape_ = std::move(shape);
  if (is_view()) {
    CHECK_LE(n, size_) << "a view cannot grow";
    size_ = n;
    return;
  }
  if (n > capacity_) {
    // 64-byte alignment: one cache line, and whole AVX-512 vectors.
    const size_t bytes = n * sizeof(T);
    T* p = static_cast<T*>(AllocateZeroed(bytes));
    CHECK(p != nullptr) << "out of memory allocating " << bytes << " bytes";
    storage_ = std::unique_ptr<T, FreeDeleter>(p, FreeDeleter{bytes});
    capacity_ = n;
  }
  data_ = storage_.get();
  size_ = n;
}

template <typename T>
void BasicTensor<T>::FreeDeleter::operator()(T* p) const {
  FreeZeroed(p, bytes);
}

template <typename T>
BasicTensor<T> BasicTensor<T>::Clone() const {
  BasicTensor out(shape_);
  if (size_ > 0) std::memcpy(out.data_, data_, size_ * sizeof(T));
  return out;
}

template <typename T>
void BasicTensor<T>::CopyFrom(const BasicTensor& other) {
  Resize(other.shape_);
  if (size_ > 0) std::memcpy(data_, other.data_, size_ * sizeof(T));
}

template <typename T>
void BasicTensor<T>::Fill(T value) {
  std::fill(data_, data_ + size_, value);
}

template class BasicTensor<float>;
template class BasicTensor<double>;

}  // namespace cohort
