// The plans behind kernels/conv_onednn.h: per geometry, the descriptors,
// primitives and ports of each pass, and the per-thread arena their
// temporary layouts live in. Shared by the forward passes (conv_onednn.cc)
// and the backward ones (conv_onednn_backward.cc); private to the kernels.
#ifndef COHORT_KERNELS_CONV_ONEDNN_PLAN_H_
#define COHORT_KERNELS_CONV_ONEDNN_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "dnnl.hpp"
#include "kernels/blocked_weights.h"
#include "kernels/conv_onednn.h"

namespace cohort {
namespace conv_internal {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;

// Per-thread buffers for the layouts that live for one pass; each slot only
// grows. Shared by every workspace of the thread (see the header). Aligned
// to cache lines, as oneDNN's own allocations are, so that a vector load
// never straddles two.
class Arena {
 public:
  enum Slot { kOut = 0, kIn = 1, kWeights = 2, kScratch = 3, kSlots = 4 };
  static void* Get(Slot slot, size_t bytes) {
    constexpr size_t kAlign = 64;
    thread_local std::vector<char> buffers[kSlots];
    std::vector<char>& b = buffers[slot];
    if (b.size() < bytes + kAlign) b.resize(bytes + kAlign);
    const auto address = reinterpret_cast<uintptr_t>(b.data());
    return b.data() + (kAlign - address % kAlign) % kAlign;
  }
  // Counts the writes into `slot` on this thread, so that a caller can
  // tell whether what it left there is still there.
  static uint64_t& Writes(Slot slot) {
    thread_local uint64_t writes[kSlots] = {};
    return writes[slot];
  }
};

// One tensor argument of a primitive: the caller's buffer in cohort's layout
// and, when the primitive wants another layout, that layout's buffer (in
// the arena, or owned for the forward's saved input) and the reorders.
struct Port {
  memory user;
  memory inner;  // the same object as `user` when the layouts agree
  std::optional<dnnl::reorder> to_inner, to_user;
  bool same = true;
  bool owned = false;              // inner owns its buffer
  Arena::Slot slot = Arena::kOut;  // otherwise the arena's slot
  size_t bytes = 0;

  Port() = default;
  Port(const memory::desc& user_md, const memory::desc& inner_md,
       const dnnl::engine& engine, bool input, Arena::Slot arena_slot,
       bool own = false)
      : user(user_md, engine, DNNL_MEMORY_NONE),
        same(user_md == inner_md),
        owned(own),
        slot(arena_slot),
        bytes(inner_md.get_size()) {
    if (same) {
      inner = user;
      return;
    }
    inner = own ? memory(inner_md, engine)
                : memory(inner_md, engine, DNNL_MEMORY_NONE);
    if (input) {
      to_inner.emplace(user, inner);
    } else {
      to_user.emplace(inner, user);
    }
  }

  // Points the port at `data` (and, if temporary, its inner layout at the
  // arena) and, for an input, reorders `data` into the inner layout.
  void Bind(const float* data, dnnl::stream& stream) {
    BindHeld(data);
    if (same) return;
    if (!owned) ++Arena::Writes(slot);
    if (to_inner) to_inner->execute(stream, user, inner);
  }
  // Bind for an input whose inner layout the arena already holds: an
  // earlier Bind of `data` to a port of the same layout and slot, with no
  // write to that slot since.
  void BindHeld(const float* data) {
    user.set_data_handle(const_cast<float*>(data));
    if (!same && !owned) inner.set_data_handle(Arena::Get(slot, bytes));
  }
  // For an output: brings the inner layout back to the caller's buffer.
  void Store(dnnl::stream& stream) {
    if (weights.block != 0) {
      FromBlockedWeights(static_cast<const float*>(inner.get_data_handle()),
                         weights.out, weights.in, weights.block,
                         static_cast<float*>(user.get_data_handle()));
    } else if (to_user) {
      to_user->execute(stream, inner, user);
    }
  }
  // A 1x1 weight gradient in OI{block}i{block}o, which Store brings back
  // itself (kernels/blocked_weights.h); block 0 otherwise.
  struct BlockedWeights {
    int64_t block = 0, out = 0, in = 0;
  } weights;
};

// `inner`'s layout when it is OI{B}i{B}o of the ungrouped 1x1 weights
// `user` (OIHW) with whole blocks of both channels; block 0 otherwise.
Port::BlockedWeights BlockedWeightsOf(const memory::desc& user,
                                      const memory::desc& inner);

// The descriptors of one geometry and, built on first use, each pass's
// primitive and ports.
struct OnednnPlan {
  ConvGeometry g;
  int64_t block = 0;  // 0: batch-inner activations; else nChw{block}c
  memory::desc src_md, dst_md, wei_md, bias_md;  // cohort's layouts
  Dims strides, dilates, pad_l, pad_r;

  std::optional<dnnl::convolution_forward::primitive_desc> fwd_pd;
  bool fwd_bias = false;
  OnednnAlgorithm fwd_algorithm = OnednnAlgorithm::kDirect;  // asked for
  bool fwd_winograd = false;  // fwd_pd is one of oneDNN's Winograd kernels
  std::optional<dnnl::convolution_forward> fwd;
  Port src, wei, dst;  // src owns its inner copy: the weight gradient reads it
  memory bias;

  // The backward primitives, each built for the OpenMP thread count it
  // runs on (oneDNN fixes its split between threads when it builds one).
  // Those built inside a team (the passes side by side, the backward
  // helper's) take their scratchpad from the running thread's arena
  // (kScratch), not from oneDNN's shared one, with which a primitive may run
  // only on the thread that built it and never on two at once: the helper's
  // may run on either thread, and oneDNN's primitive cache gives layers of
  // one shape the same primitive.
  //
  // What a backward primitive was built for; it is rebuilt when any differs.
  struct BuiltFor {
    OnednnAlgorithm algorithm = OnednnAlgorithm::kDirect;
    int threads = 0;
    bool own_scratch = false;
    bool bias = false;  // weight gradient only
    bool operator==(const BuiltFor& o) const {
      return algorithm == o.algorithm && threads == o.threads &&
             own_scratch == o.own_scratch && bias == o.bias;
    }
  };
  std::optional<dnnl::convolution_backward_weights> bww;
  BuiltFor bww_for;
  bool bww_src_from_fwd = false;  // reads the forward's src.inner
  Port bww_src, bww_ddst, bww_dwei;
  memory dbias;
  memory bww_scratch;

  std::optional<dnnl::convolution_backward_data> bwd;
  BuiltFor bwd_for;
  Port bwd_ddst, bwd_wei, bwd_dsrc;
  memory bwd_scratch;

  // Evaluation with the following batch norm folded in (its scale into the
  // weights, its shift as the bias) and the sum and ReLU fused as post-ops,
  // one primitive per combination (OnednnScaledForward).
  struct Scaled {
    bool residual, relu, frozen;
    OnednnAlgorithm algorithm;
    // frozen: the weights and scale whose product wei.inner holds
    const float* converted = nullptr;
    const float* converted_scale = nullptr;
    std::vector<float> folded;  // weight[oc][...] * scale[oc], cohort's layout
    std::optional<dnnl::convolution_forward> primitive;
    bool winograd = false;
    memory src, dst, shift, sum;
    Port wei;
  };
  std::vector<Scaled> scaled;
};

struct OnednnState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  // The input gradient's, while the weight gradient runs beside it on
  // `stream` (OnednnBackwardSideBySide).
  dnnl::stream side_stream{engine};
  // A few geometries (a training and an evaluation batch size, say); the
  // oldest goes when a new one comes.
  std::vector<std::unique_ptr<OnednnPlan>> plans;
  OnednnPlan* last_forward = nullptr;
  bool ran_winograd = false;  // the last forward, training or evaluation
  // The output gradient the last weight gradient left in the arena in the
  // input gradient's layout, which then need not reorder it again.
  const float* held_grad_out = nullptr;
  OnednnPlan* held_plan = nullptr;
  uint64_t held_writes = 0;
};

// What a primitive is told of a tensor in `user`'s layout: that layout
// itself for channel-blocked activations (the caller keeps them so that no
// pass reorders), "any" otherwise (the primitive picks, the ports reorder).
inline memory::desc Act(const OnednnPlan& p, const memory::desc& user) {
  if (p.block != 0) return user;
  return memory::desc(user.dims(), memory::data_type::f32, Tag::any);
}

inline memory::desc Any(const memory::desc& user) {
  return memory::desc(user.dims(), memory::data_type::f32, Tag::any);
}
// A primitive descriptor from make(algorithm): `algorithm`, or the direct
// one where oneDNN has no Winograd kernel for these descriptors.
template <typename MakePd>
auto Create(OnednnAlgorithm algorithm, const MakePd& make) {
  if (algorithm == OnednnAlgorithm::kWinograd) {
    try {
      return make(dnnl::algorithm::convolution_winograd);
    } catch (const dnnl::error&) {
      // Not for these descriptors: direct below.
    }
  }
  return make(dnnl::algorithm::convolution_direct);
}
// The plan of geometry `g` on `block` (0: batch-inner), made on first use.
OnednnPlan* FindPlan(const ConvGeometry& g, int64_t block,
                     OnednnStatePtr* state);

// The forward primitive descriptor, also the hint of the backward ones.
const dnnl::convolution_forward::primitive_desc& ForwardPd(
    OnednnPlan* p, const dnnl::engine& engine, bool bias,
    OnednnAlgorithm algorithm);

}  // namespace conv_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_CONV_ONEDNN_PLAN_H_
