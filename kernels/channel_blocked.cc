#include "kernels/channel_blocked.h"

#include <memory>
#include <vector>

#include "common/logging.h"
#include "dnnl.hpp"
#include "kernels/onednn_threads.h"

namespace cohort {
namespace {

using dnnl::memory;

// One direction of one shape, with its primitive and the two memories whose
// handles each call points at the caller's buffers.
struct Conversion {
  int64_t channels, batch, positions, block;
  bool to_blocked;
  memory from, to;
  dnnl::reorder reorder;
};

class Converter {
 public:
  void Run(const float* in, int64_t channels, int64_t batch, int64_t positions,
           int64_t block, bool to_blocked, float* out) {
    CHECK(block > 0 && channels % block == 0)
        << channels << " channels in blocks of " << block;
    ApplyOnednnThreads();
    Conversion& c = Find(channels, batch, positions, block, to_blocked);
    c.from.set_data_handle(const_cast<float*>(in));
    c.to.set_data_handle(out);
    c.reorder.execute(stream_, c.from, c.to);
    stream_.wait();
  }

 private:
  // A model has a few shapes; the oldest goes past kMaxShapes.
  static constexpr size_t kMaxShapes = 64;

  Conversion& Find(int64_t channels, int64_t batch, int64_t positions,
                   int64_t block, bool to_blocked) {
    for (auto& c : cache_) {
      if (c->channels == channels && c->batch == batch &&
          c->positions == positions && c->block == block &&
          c->to_blocked == to_blocked) {
        return *c;
      }
    }
    if (cache_.size() == kMaxShapes) cache_.erase(cache_.begin());
    const memory::dims dims = {batch, channels, positions, 1};
    const memory::desc inner(dims, memory::data_type::f32,
                             memory::dims{positions, batch * positions, 1, 1});
    const memory::desc blocked(
        dims, memory::data_type::f32,
        block == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c);
    const memory::desc& from = to_blocked ? inner : blocked;
    const memory::desc& to = to_blocked ? blocked : inner;
    memory from_mem(from, engine_, DNNL_MEMORY_NONE);
    memory to_mem(to, engine_, DNNL_MEMORY_NONE);
    dnnl::reorder reorder(from_mem, to_mem);
    cache_.push_back(std::make_unique<Conversion>(
        Conversion{channels, batch, positions, block, to_blocked, from_mem,
                   to_mem, reorder}));
    return *cache_.back();
  }

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::vector<std::unique_ptr<Conversion>> cache_;
};

Converter& ThreadConverter() {
  thread_local Converter converter;
  return converter;
}

}  // namespace

int64_t NativeChannelBlock() {
  // The ISA values are masks of the instruction sets they include.
  static const int64_t block = [] {
    const int isa = dnnl_get_effective_cpu_isa();
    const auto has = [isa](int set) { return (isa & set) == set; };
    if (has(dnnl_cpu_isa_avx512_core)) return int64_t{16};
    if (has(dnnl_cpu_isa_avx2)) return int64_t{8};
    return int64_t{0};
  }();
  return block;
}

void ToChannelBlocked(const float* in, int64_t channels, int64_t batch,
                      int64_t positions, int64_t block, float* out) {
  ThreadConverter().Run(in, channels, batch, positions, block, true, out);
}

void FromChannelBlocked(const float* in, int64_t channels, int64_t batch,
                        int64_t positions, int64_t block, float* out) {
  ThreadConverter().Run(in, channels, batch, positions, block, false, out);
}

}  // namespace cohort
