// Stands in for Gloo's gloo/common/memory.h, which Debian's libgloo-dev
// (0.0~git20220518) does not install although its gloo/transport/tcp/*.h
// include it. gloo_communicator.cc needs gloo/transport/tcp/pair.h to reach
// a pair's socket (see PairSocket there); it instantiates none of these
// templates, so only their names and shapes matter: a buffer's owner hands
// out weak references that lock into short-lived strong ones.
#ifndef COHORT_WORKER_COMM_GLOO_COMPAT_GLOO_COMMON_MEMORY_H_
#define COHORT_WORKER_COMM_GLOO_COMPAT_GLOO_COMMON_MEMORY_H_

#include <memory>

namespace gloo {

template <typename T>
class NonOwningPtr {
 public:
  NonOwningPtr() = default;
  explicit NonOwningPtr(std::shared_ptr<T> ptr) : ptr_(std::move(ptr)) {}
  T* get() const { return ptr_.get(); }
  T* operator->() const { return ptr_.get(); }
  T& operator*() const { return *ptr_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  std::shared_ptr<T> ptr_;
};

template <typename T>
class ShareableNonOwningPtr {
 public:
  explicit ShareableNonOwningPtr(T* ptr) : ptr_(ptr, [](T*) {}) {}
  std::weak_ptr<T> weak() const { return ptr_; }

 private:
  std::shared_ptr<T> ptr_;
};

template <typename T>
class WeakNonOwningPtr {
 public:
  WeakNonOwningPtr() = default;
  explicit WeakNonOwningPtr(const ShareableNonOwningPtr<T>& owner)
      : ptr_(owner.weak()) {}
  NonOwningPtr<T> lock() const { return NonOwningPtr<T>(ptr_.lock()); }

 private:
  std::weak_ptr<T> ptr_;
};

}  // namespace gloo

#endif  // COHORT_WORKER_COMM_GLOO_COMPAT_GLOO_COMMON_MEMORY_H_
