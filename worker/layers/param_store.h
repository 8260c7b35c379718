// Flat, contiguous parameter and gradient storage for a list of layers.
//
// All parameters of a model live in one buffer and all gradients in another,
// in the order the layers declare them, so that communication can treat
// them as a few large buckets. Each parameter starts at a multiple of 16
// elements (64 bytes) for aligned vector loads.
//
// Ownership: the store owns both buffers; layers hold views into them (the
// layers must not outlive the store). Thread safety: none.
#ifndef COHORT_WORKER_LAYERS_PARAM_STORE_H_
#define COHORT_WORKER_LAYERS_PARAM_STORE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/tensor.h"
#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class ParamStore {
 public:
  struct Entry {
    std::string name;  // "3.weight": layer index and parameter name
    Shape shape;
    int64_t offset;  // in elements, into values()/grads()
    ParamDecl::Init init;
    int64_t fan_in;
    double std;    // kNormal's
    double value;  // kConstant's
  };

  // A sparse table (ParamDecl::sparse): declared, named and seeded like
  // the others, but stored elsewhere (worker/layers/sparse_table.h).
  struct SparseEntry {
    std::string name;
    Shape shape;  // {rows, dim}
    int64_t fan_in;
    uint64_t seed = 0;  // drawn by Initialize (kRowUniform)
  };

  ParamStore() = default;
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  // Allocates storage for every parameter of `layers` (already configured)
  // and binds each layer to its views. Call once.
  void Build(absl::Span<Layer<T>* const> layers);

  // Like Build, but the layers read the parameter values of `owner` (built
  // from an identical list of layers) and only the gradients are this
  // store's. In-process replicas share one copy of the parameters this way:
  // they are identical by construction, so nothing needs to be broadcast.
  void BuildShared(absl::Span<Layer<T>* const> layers, ParamStore& owner);

  // Fills every parameter as its declaration says (PyTorch's defaults),
  // and draws the sparse tables' seeds, all in declaration order.
  void Initialize(Rng& rng);

  BasicTensor<T>& values() { return values_; }
  const BasicTensor<T>& values() const { return values_; }
  BasicTensor<T>& grads() { return grads_; }
  const BasicTensor<T>& grads() const { return grads_; }
  // The tensors of the flat buffers.
  const std::vector<Entry>& entries() const { return entries_; }
  // The sparse tables, in declaration order.
  const std::vector<SparseEntry>& sparse_entries() const {
    return sparse_entries_;
  }
  // Parameters proper (excludes alignment padding).
  int64_t num_parameters() const { return num_parameters_; }

 private:
  std::vector<Entry> entries_;
  std::vector<SparseEntry> sparse_entries_;
  // Declaration order over both: (sparse, index into its list).
  std::vector<std::pair<bool, size_t>> order_;
  BasicTensor<T> values_;
  BasicTensor<T> grads_;
  int64_t num_parameters_ = 0;

  void Layout(absl::Span<Layer<T>* const> layers);
  void InitializeEntry(const Entry& e, Rng& rng);
  void BindAll(absl::Span<Layer<T>* const> layers, T* values);
};

extern template class ParamStore<float>;
extern template class ParamStore<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_PARAM_STORE_H_
