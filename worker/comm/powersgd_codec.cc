#include "worker/comm/powersgd_codec.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/elementwise.h"
#include "kernels/low_rank.h"

namespace cohort {

struct PowerSgdCodec::Bucket {
  struct Matrix {
    int64_t offset;  // in the bucket
    int64_t rows, cols;
    int rank;
    int64_t p, q;  // into P (after the whole tensors) and Q
  };
  float* data = nullptr;
  int64_t begin = 0, count = 0;
  std::vector<Matrix> matrices;
  std::vector<std::pair<int64_t, int64_t>> whole;  // offset, numel
  int64_t whole_count = 0, p_count = 0;
  // The whole tensors, then every P^T (rank x rows); Q^T (rank x cols).
  // The saved state holds Q as PyTorch does, each matrix's cols x rank.
  std::vector<float> pu;
  std::vector<float> q;
  std::vector<float> input;  // gradient plus error, before the exchange
  bool q_set = false;
  std::unique_ptr<AllReducePlan> plain, pu_plan, q_plan;
};

namespace {

// N(0, 1) from a counter-based generator (splitmix64, Box-Muller): the same
// numbers on every rank and machine for one seed.
class Normals {
 public:
  explicit Normals(uint64_t seed) : state_(seed) {}
  float Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = (Bits() >> 11) * 0x1.0p-53;
    const double u2 = (Bits() >> 11) * 0x1.0p-53;
    const double radius = std::sqrt(-2.0 * std::log(1.0 - u1));
    spare_ = static_cast<float>(radius * std::sin(2 * M_PI * u2));
    has_spare_ = true;
    return static_cast<float>(radius * std::cos(2 * M_PI * u2));
  }

 private:
  uint64_t Bits() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
  float spare_ = 0;
  bool has_spare_ = false;
};

void Scale(float* data, int64_t count, float scale) {
  if (scale == 1.0f) return;
  for (int64_t i = 0; i < count; ++i) data[i] *= scale;
}

// Between a bucket's Q^T blocks (rank x cols each) and the saved layout
// (cols x rank each), either way.
template <typename Matrices>
void ConvertQ(const Matrices& matrices, const float* from, float* to,
              bool to_saved) {
  for (const auto& mat : matrices) {
    for (int64_t c = 0; c < mat.cols; ++c) {
      for (int k = 0; k < mat.rank; ++k) {
        const int64_t saved = mat.q + c * mat.rank + k;
        const int64_t held = mat.q + k * mat.cols + c;
        if (to_saved) {
          to[saved] = from[held];
        } else {
          to[held] = from[saved];
        }
      }
    }
  }
}

}  // namespace

PowerSgdCodec::PowerSgdCodec(const PowerSgdOptions& options,
                             std::vector<FlatTensor> tensors,
                             int64_t flat_count)
    : options_(options),
      tensors_(std::move(tensors)),
      error_(flat_count, 0.0f) {
  CHECK_GE(options_.rank, 1);
}

PowerSgdCodec::~PowerSgdCodec() = default;

// PyTorch's choice and order: the compressed matrices grouped by shape in
// order of first appearance, the rest whole in bucket order.
void PowerSgdCodec::Layout(Bucket& b, int64_t begin, int64_t count) const {
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::vector<int64_t>>>
      groups;
  for (const FlatTensor& t : tensors_) {
    const int64_t lo = std::max(t.offset, begin);
    const int64_t hi = std::min(t.offset + t.numel, begin + count);
    if (lo >= hi) continue;
    const int64_t n = std::max<int64_t>(1, t.rows), m = t.numel / n;
    const int64_t r = std::min<int64_t>({n, m, options_.rank});
    const bool inside = lo == t.offset && hi == t.offset + t.numel;
    if (!inside || n * m != t.numel ||
        !((n + m) * r * options_.min_compression_rate < n * m)) {
      b.whole.push_back({lo - begin, hi - lo});
      b.whole_count += hi - lo;
      continue;
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
      return g.first == std::make_pair(n, m);
    });
    if (it == groups.end()) it = groups.insert(groups.end(), {{n, m}, {}});
    it->second.push_back(t.offset - begin);
  }
  int64_t p = 0, q = 0;
  for (const auto& [shape, offsets] : groups) {
    const auto [n, m] = shape;
    const int r = static_cast<int>(std::min<int64_t>({n, m, options_.rank}));
    for (int64_t offset : offsets) {
      b.matrices.push_back({offset, n, m, r, p, q});
      p += n * r;
      q += m * r;
    }
  }
  b.p_count = p;
  b.pu.assign(b.whole_count + p, 0.0f);
  b.q.assign(q, 0.0f);
}

absl::Status PowerSgdCodec::Bind(Communicator* comm, int index, float* data,
                                 int64_t begin, int64_t count, int lane) {
  if (index == 0) buckets_.clear();
  CHECK_EQ(index, static_cast<int>(buckets_.size()))
      << "buckets bound out of order";
  auto b = std::make_unique<Bucket>();
  b->data = data;
  b->begin = begin;
  b->count = count;
  Layout(*b, begin, count);
  ASSIGN_OR_RETURN(b->plain, comm->PlanAllReduceSum(data, count, lane));
  ASSIGN_OR_RETURN(b->pu_plan,
                   comm->PlanAllReduceSum(b->pu.data(), b->pu.size(), lane));
  ASSIGN_OR_RETURN(b->q_plan,
                   comm->PlanAllReduceSum(b->q.data(), b->q.size(), lane));
  if (index == 0) bound_q_ = 0;
  const int64_t q = static_cast<int64_t>(b->q.size());
  if (!pending_q_.empty()) {
    if (static_cast<int64_t>(pending_q_.size()) < bound_q_ + q) {
      return absl::InvalidArgumentError(
          absl::StrCat("the saved PowerSGD factors hold ", pending_q_.size(),
                       " values; this model's buckets need more (",
                       bound_q_ + q, " by bucket ", index, ")"));
    }
    ConvertQ(b->matrices, pending_q_.data() + bound_q_, b->q.data(), false);
    b->q_set = true;
  }
  bound_q_ += q;
  buckets_.push_back(std::move(b));
  return absl::OkStatus();
}

std::vector<float> PowerSgdCodec::SaveState() const {
  std::vector<float> state = error_;
  if (buckets_.empty()) {
    state.insert(state.end(), pending_q_.begin(), pending_q_.end());
    return state;
  }
  const std::vector<float> qs = Qs();
  state.insert(state.end(), qs.begin(), qs.end());
  return state;
}

absl::Status PowerSgdCodec::LoadState(std::vector<float> state) {
  const int64_t n = static_cast<int64_t>(error_.size());
  if (static_cast<int64_t>(state.size()) < n) {
    return absl::InvalidArgumentError(
        absl::StrCat("the saved PowerSGD state holds ", state.size(),
                     " values; this model's gradient alone has ", n));
  }
  std::copy(state.begin(), state.begin() + n, error_.begin());
  pending_q_.assign(state.begin() + n, state.end());
  if (!buckets_.empty() && !pending_q_.empty()) return SetQs(pending_q_);
  return absl::OkStatus();
}

void PowerSgdCodec::PrepareQ(Bucket& b, int index) {
  if (!b.q_set) {
    // Drawn in the saved layout's order, as every rank draws them.
    std::vector<float> saved(b.q.size());
    Normals normals(options_.seed * 0x100000001b3ull + index);
    for (float& v : saved) v = normals.Next();
    ConvertQ(b.matrices, saved.data(), b.q.data(), false);
    b.q_set = true;
  }
  for (const Bucket::Matrix& mat : b.matrices) {
    OrthogonalizeRows(b.q.data() + mat.q, mat.rank, mat.cols, 0);
  }
}

absl::StatusOr<int64_t> PowerSgdCodec::Reduce(int index, float scale) {
  Bucket& b = *buckets_[index];
  if (step_ < options_.warmup_steps) {
    RETURN_IF_ERROR(b.plain->Run());
    Scale(b.data, b.count, scale);
    return b.count * int64_t{sizeof(float)};
  }
  float* error = error_.data() + b.begin;
  b.input.resize(b.count);
  Add(b.data, error, b.input.data(), b.count);
  PrepareQ(b, index);
  float* packed = b.pu.data();
  for (const auto& [offset, numel] : b.whole) {
    std::copy(b.input.data() + offset, b.input.data() + offset + numel, packed);
    packed += numel;
  }
  float* ps = b.pu.data() + b.whole_count;
  for (const Bucket::Matrix& mat : b.matrices) {
    LowRankProject(b.input.data() + mat.offset, mat.rows, mat.cols,
                   b.q.data() + mat.q, mat.rank, ps + mat.p);
  }
  RETURN_IF_ERROR(b.pu_plan->Run());
  Compress(b, scale);
  RETURN_IF_ERROR(b.q_plan->Run());
  LowRankExpansion x;
  x.scale = scale;
  x.share = static_cast<float>(options_.local_replicas);
  for (const Bucket::Matrix& mat : b.matrices) {
    x.input = b.input.data() + mat.offset;
    x.out = b.data + mat.offset;
    x.error = error + mat.offset;
    LowRankExpand(ps + mat.p, b.q.data() + mat.q, mat.rows, mat.cols, mat.rank,
                  x);
  }
  return static_cast<int64_t>(b.pu.size() + b.q.size()) *
         int64_t{sizeof(float)};
}

// Between the two all-reduces: the whole tensors' means back in place and
// their error taken, P orthogonalized, Q = M^T P.
void PowerSgdCodec::Compress(Bucket& b, float scale) {
  const float share = static_cast<float>(options_.local_replicas);
  float* error = error_.data() + b.begin;
  const float* packed = b.pu.data();
  for (const auto& [offset, numel] : b.whole) {
    for (int64_t i = offset; i < offset + numel; ++i) {
      b.data[i] = *packed++ * scale;
      error[i] = b.input[i] - b.data[i] * share;
    }
  }
  float* ps = b.pu.data() + b.whole_count;
  for (const Bucket::Matrix& mat : b.matrices) {
    OrthogonalizeRows(ps + mat.p, mat.rank, mat.rows, 0);
    LowRankProjectBack(b.input.data() + mat.offset, mat.rows, mat.cols,
                       ps + mat.p, mat.rank, b.q.data() + mat.q);
  }
}

std::vector<float> PowerSgdCodec::Qs() const {
  std::vector<float> all;
  for (const auto& b : buckets_) {
    if (!b->q_set) continue;
    all.resize(all.size() + b->q.size());
    ConvertQ(b->matrices, b->q.data(), all.data() + all.size() - b->q.size(),
             true);
  }
  return all;
}

int64_t PowerSgdCodec::q_count() const {
  int64_t n = 0;
  for (const auto& b : buckets_) n += static_cast<int64_t>(b->q.size());
  return n;
}

absl::Status PowerSgdCodec::SetQs(absl::Span<const float> qs) {
  if (static_cast<int64_t>(qs.size()) != q_count()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PowerSGD state holds ", qs.size(),
                     " factor values; this model's buckets need ", q_count()));
  }
  for (auto& b : buckets_) {
    ConvertQ(b->matrices, qs.data(), b->q.data(), false);
    qs.remove_prefix(b->q.size());
    b->q_set = true;
  }
  return absl::OkStatus();
}

}  // namespace cohort
