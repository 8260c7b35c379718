#include "worker/layers/param_store.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/sparse_rows.h"

namespace cohort {
namespace {

constexpr int64_t kAlign = 16;  // elements; 64 bytes of float

int64_t RoundUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

template <typename T>
void ParamStore<T>::Layout(absl::Span<Layer<T>* const> layers) {
  CHECK(entries_.empty()) << "ParamStore built twice";
  int64_t total = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    for (const ParamDecl& d : layers[i]->Params()) {
      if (d.sparse) {
        order_.push_back({true, sparse_entries_.size()});
        sparse_entries_.push_back(
            {absl::StrCat(i, ".", d.name), d.shape, d.fan_in});
        continue;
      }
      order_.push_back({false, entries_.size()});
      entries_.push_back({absl::StrCat(i, ".", d.name), d.shape, total, d.init,
                          d.fan_in, d.std, d.value});
      num_parameters_ += NumElements(d.shape);
      total += RoundUp(NumElements(d.shape));
    }
  }
  grads_.Resize({total});
}

template <typename T>
void ParamStore<T>::BindAll(absl::Span<Layer<T>* const> layers, T* values) {
  size_t e = 0;
  for (Layer<T>* layer : layers) {
    std::vector<BasicTensor<T>> v, g;
    for (const ParamDecl& d : layer->Params()) {
      if (d.sparse) {  // stored elsewhere: empty views keep the order
        v.emplace_back();
        g.emplace_back();
        continue;
      }
      v.push_back(
          BasicTensor<T>::View(values + entries_[e].offset, entries_[e].shape));
      g.push_back(BasicTensor<T>::View(grads_.data() + entries_[e].offset,
                                       entries_[e].shape));
      ++e;
    }
    layer->Bind(std::move(v), std::move(g));
  }
  CHECK_EQ(e, entries_.size());
}

template <typename T>
void ParamStore<T>::Build(absl::Span<Layer<T>* const> layers) {
  Layout(layers);
  values_.Resize(grads_.shape());
  BindAll(layers, values_.data());
}

template <typename T>
void ParamStore<T>::BuildShared(absl::Span<Layer<T>* const> layers,
                                ParamStore& owner) {
  Layout(layers);
  CHECK_EQ(grads_.size(), owner.values_.size())
      << "BuildShared: the layers differ from the owner's";
  values_ = BasicTensor<T>::View(owner.values_.data(), owner.values_.shape());
  BindAll(layers, values_.data());
}

template <typename T>
void ParamStore<T>::Initialize(Rng& rng) {
  for (const auto& [sparse, i] : order_) {
    if (sparse) {
      sparse_entries_[i].seed = rng();
    } else {
      InitializeEntry(entries_[i], rng);
    }
  }
}

template <typename T>
void ParamStore<T>::InitializeEntry(const Entry& e, Rng& rng) {
  T* p = values_.data() + e.offset;
  const int64_t n = NumElements(e.shape);
  switch (e.init) {
    case ParamDecl::Init::kKaimingUniform:
    case ParamDecl::Init::kFanInUniform: {
      // kaiming_uniform_(a=sqrt(5)) and the bias rule both reduce to
      // U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
      const double bound = 1.0 / std::sqrt(static_cast<double>(e.fan_in));
      std::uniform_real_distribution<double> dist(-bound, bound);
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(dist(rng));
      break;
    }
    case ParamDecl::Init::kOnes:
      for (int64_t i = 0; i < n; ++i) p[i] = T(1);
      break;
    case ParamDecl::Init::kZeros:
      for (int64_t i = 0; i < n; ++i) p[i] = T(0);
      break;
    case ParamDecl::Init::kNormal: {
      std::normal_distribution<double> dist(0.0, e.std);
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(dist(rng));
      break;
    }
    case ParamDecl::Init::kConstant:
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(e.value);
      break;
    case ParamDecl::Init::kRowUniform: {
      // The seed a sparse table of the same declaration would draw.
      const uint64_t seed = rng();
      const int64_t dim = e.shape.back();
      const double bound = 1.0 / std::sqrt(static_cast<double>(e.fan_in));
      for (int64_t r = 0; r < n / dim; ++r) {
        SparseRowInit(seed, r, dim, bound, p + r * dim);
      }
      break;
    }
  }
}

template class ParamStore<float>;
template class ParamStore<double>;

}  // namespace cohort
