#include "kernels/conv_onednn.h"

#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "dnnl.hpp"
#include "kernels/backward_helper.h"
#include "kernels/blocked_weights.h"

namespace cohort {
namespace {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;

// A batch-inner activation [C][N][H][W] as oneDNN's logical {N, C, H, W}.
memory::desc BatchInner(int64_t n, int64_t c, int64_t h, int64_t w) {
  return memory::desc({n, c, h, w}, memory::data_type::f32,
                      Dims{h * w, n * h * w, w, 1});
}

// The same activation in oneDNN's nChw{block}c layout.
memory::desc Blocked(int64_t n, int64_t c, int64_t h, int64_t w,
                     int64_t block) {
  return memory::desc({n, c, h, w}, memory::data_type::f32,
                      block == 16 ? Tag::nChw16c : Tag::nChw8c);
}

memory::desc Plain(const Dims& dims, Tag tag) {
  return memory::desc(dims, memory::data_type::f32, tag);
}

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
                                      const memory::desc& inner) {
  const memory::dims d = user.dims();
  if (d.size() != 4 || d[2] != 1 || d[3] != 1) return {};
  for (int64_t block : {16, 8}) {
    const memory::desc blocked(d, memory::data_type::f32,
                               block == 16 ? Tag::ABcd16b16a : Tag::ABcd8b8a);
    if (inner == blocked && d[0] % block == 0 && d[1] % block == 0) {
      return {block, d[0], d[1]};
    }
  }
  return {};
}

bool SameGeometry(const ConvGeometry& a, const ConvGeometry& b) {
  return a.batch == b.batch && a.in_channels == b.in_channels &&
         a.in_h == b.in_h && a.in_w == b.in_w &&
         a.out_channels == b.out_channels && a.kernel_h == b.kernel_h &&
         a.kernel_w == b.kernel_w && a.stride == b.stride &&
         a.row_stride() == b.row_stride() && a.pad_h == b.pad_h &&
         a.pad_w == b.pad_w && a.extra_h == b.extra_h &&
         a.extra_w == b.extra_w && a.dilation == b.dilation;
}

}  // namespace

namespace conv_internal {

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
  std::optional<dnnl::convolution_backward_weights> bww;
  bool bww_bias = false;
  OnednnAlgorithm bww_algorithm = OnednnAlgorithm::kDirect;
  int bww_threads = 0;
  bool bww_own_scratch = false;
  bool bww_src_from_fwd = false;  // reads the forward's src.inner
  Port bww_src, bww_ddst, bww_dwei;
  memory dbias;
  memory bww_scratch;

  std::optional<dnnl::convolution_backward_data> bwd;
  OnednnAlgorithm bwd_algorithm = OnednnAlgorithm::kDirect;
  int bwd_threads = 0;
  bool bwd_own_scratch = false;
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

void OnednnStateDeleter::operator()(OnednnState* state) const { delete state; }

namespace {

constexpr size_t kMaxPlans = 4;

// What a primitive is told of a tensor in `user`'s layout: that layout
// itself for channel-blocked activations (the caller keeps them so that no
// pass reorders), "any" otherwise (the primitive picks, the ports reorder).
memory::desc Act(const OnednnPlan& p, const memory::desc& user) {
  if (p.block != 0) return user;
  return memory::desc(user.dims(), memory::data_type::f32, Tag::any);
}

memory::desc Any(const memory::desc& user) {
  return memory::desc(user.dims(), memory::data_type::f32, Tag::any);
}

bool IsWinograd(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).find("wino") != std::string::npos;
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

dnnl::convolution_forward::desc ForwardDesc(const OnednnPlan& p, bool bias,
                                            dnnl::algorithm algorithm) {
  const memory::desc any_src = Act(p, p.src_md);
  const memory::desc any_dst = Act(p, p.dst_md);
  const memory::desc any_wei = Any(p.wei_md);
  if (bias) {
    return {dnnl::prop_kind::forward_training,
            algorithm,
            any_src,
            any_wei,
            p.bias_md,
            any_dst,
            p.strides,
            p.dilates,
            p.pad_l,
            p.pad_r};
  }
  return {dnnl::prop_kind::forward_training,
          algorithm,
          any_src,
          any_wei,
          any_dst,
          p.strides,
          p.dilates,
          p.pad_l,
          p.pad_r};
}

std::unique_ptr<OnednnPlan> MakePlan(const ConvGeometry& g, int64_t block) {
  auto p = std::make_unique<OnednnPlan>();
  p->g = g;
  p->block = block;
  if (block != 0) {
    p->src_md = Blocked(g.batch, g.in_channels, g.in_h, g.in_w, block);
    p->dst_md = Blocked(g.batch, g.out_channels, g.out_h(), g.out_w(), block);
  } else {
    p->src_md = BatchInner(g.batch, g.in_channels, g.in_h, g.in_w);
    p->dst_md = BatchInner(g.batch, g.out_channels, g.out_h(), g.out_w());
  }
  p->wei_md =
      Plain({g.out_channels, g.in_channels, g.kernel_h, g.kernel_w}, Tag::oihw);
  p->bias_md = Plain({g.out_channels}, Tag::x);
  p->strides = {g.row_stride(), g.stride};
  p->dilates = {g.dilation - 1, g.dilation - 1};
  p->pad_l = {g.pad_h, g.pad_w};
  p->pad_r = {g.pad_h + g.extra_h, g.pad_w + g.extra_w};
  return p;
}

OnednnPlan* FindPlan(const ConvGeometry& g, int64_t block,
                     OnednnStatePtr* state) {
  if (*state == nullptr) state->reset(new OnednnState);
  OnednnState& s = **state;
  for (auto& p : s.plans) {
    if (SameGeometry(p->g, g) && p->block == block) return p.get();
  }
  if (s.plans.size() == kMaxPlans) {
    // The oldest, unless the weight gradient still needs it.
    const bool keep_first = s.plans.front().get() == s.last_forward;
    s.plans.erase(s.plans.begin() + (keep_first ? 1 : 0));
  }
  s.plans.push_back(MakePlan(g, block));
  return s.plans.back().get();
}

// The forward primitive descriptor, also the hint of the backward ones.
const dnnl::convolution_forward::primitive_desc& ForwardPd(
    OnednnPlan* p, const dnnl::engine& engine, bool bias,
    OnednnAlgorithm algorithm) {
  if (!p->fwd_pd || p->fwd_bias != bias || p->fwd_algorithm != algorithm) {
    p->fwd_pd.emplace(Create(algorithm, [&](dnnl::algorithm a) {
      return dnnl::convolution_forward::primitive_desc(ForwardDesc(*p, bias, a),
                                                       engine);
    }));
    p->fwd_bias = bias;
    p->fwd_algorithm = algorithm;
    p->fwd_winograd = IsWinograd(*p->fwd_pd);
    p->fwd.reset();
  }
  return *p->fwd_pd;
}

void BuildForward(OnednnPlan* p, const dnnl::engine& engine, bool bias,
                  OnednnAlgorithm algorithm) {
  const auto& pd = ForwardPd(p, engine, bias, algorithm);
  if (p->fwd) return;
  p->fwd.emplace(pd);
  p->src = Port(p->src_md, pd.src_desc(), engine, true, Arena::kIn, true);
  p->wei = Port(p->wei_md, pd.weights_desc(), engine, true, Arena::kWeights);
  p->dst = Port(p->dst_md, pd.dst_desc(), engine, false, Arena::kOut);
  if (bias) p->bias = memory(p->bias_md, engine, DNNL_MEMORY_NONE);
  // The weight gradient's primitive may have chosen its input layout for
  // another forward layout.
  p->bww.reset();
}

// A primitive built inside an OpenMP team takes its scratchpad from the
// caller (BindScratch).
bool OwnScratch() { return omp_in_parallel(); }

dnnl::primitive_attr ScratchpadAttr(bool own) {
  dnnl::primitive_attr attr;
  if (own) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// `scratch` pointed at this thread's arena, for one execution.
memory& BindScratch(memory& scratch) {
  const size_t bytes = scratch.get_desc().get_size();
  if (bytes > 0) {
    scratch.set_data_handle(Arena::Get(Arena::kScratch, bytes));
  }
  return scratch;
}

void BuildBackwardWeights(OnednnPlan* p, const dnnl::engine& engine, bool bias,
                          OnednnAlgorithm algorithm) {
  const int threads = omp_get_max_threads();
  const bool own = OwnScratch();
  if (p->bww && p->bww_bias == bias && p->bww_algorithm == algorithm &&
      p->bww_threads == threads && p->bww_own_scratch == own) {
    return;
  }
  const auto& hint = ForwardPd(p, engine, p->fwd_bias, p->fwd_algorithm);
  const memory::desc any_dst = Act(*p, p->dst_md);
  const memory::desc any_wei = Any(p->wei_md);
  const memory::desc src = Act(*p, p->src_md);
  const auto pd = Create(algorithm, [&](dnnl::algorithm a) {
    const auto desc = bias ? dnnl::convolution_backward_weights::desc(
                                 a, src, any_wei, p->bias_md, any_dst,
                                 p->strides, p->dilates, p->pad_l, p->pad_r)
                           : dnnl::convolution_backward_weights::desc(
                                 a, src, any_wei, any_dst, p->strides,
                                 p->dilates, p->pad_l, p->pad_r);
    return dnnl::convolution_backward_weights::primitive_desc(
        desc, ScratchpadAttr(own), engine, hint);
  });
  p->bww.emplace(pd);
  p->bww_bias = bias;
  p->bww_algorithm = algorithm;
  p->bww_threads = threads;
  p->bww_own_scratch = own;
  p->bww_src_from_fwd = pd.src_desc() == hint.src_desc();
  if (!p->bww_src_from_fwd) {
    p->bww_src = Port(p->src_md, pd.src_desc(), engine, true, Arena::kIn);
  }
  p->bww_ddst = Port(p->dst_md, pd.diff_dst_desc(), engine, true, Arena::kOut);
  p->bww_dwei =
      Port(p->wei_md, pd.diff_weights_desc(), engine, false, Arena::kWeights);
  p->bww_dwei.weights = BlockedWeightsOf(p->wei_md, pd.diff_weights_desc());
  if (bias) p->dbias = memory(p->bias_md, engine, DNNL_MEMORY_NONE);
  p->bww_scratch = memory(pd.scratchpad_desc(), engine, DNNL_MEMORY_NONE);
}

void BuildBackwardData(OnednnPlan* p, const dnnl::engine& engine,
                       OnednnAlgorithm algorithm) {
  const int threads = omp_get_max_threads();
  const bool own = OwnScratch();
  if (p->bwd && p->bwd_algorithm == algorithm && p->bwd_threads == threads &&
      p->bwd_own_scratch == own) {
    return;
  }
  const auto& hint = ForwardPd(p, engine, p->fwd_bias, p->fwd_algorithm);
  const memory::desc any_src = Act(*p, p->src_md);
  const memory::desc any_dst = Act(*p, p->dst_md);
  const memory::desc any_wei = Any(p->wei_md);
  const auto pd = Create(algorithm, [&](dnnl::algorithm a) {
    const dnnl::convolution_backward_data::desc desc(
        a, any_src, any_wei, any_dst, p->strides, p->dilates, p->pad_l,
        p->pad_r);
    return dnnl::convolution_backward_data::primitive_desc(
        desc, ScratchpadAttr(own), engine, hint);
  });
  p->bwd.emplace(pd);
  p->bwd_algorithm = algorithm;
  p->bwd_threads = threads;
  p->bwd_own_scratch = own;
  p->bwd_ddst = Port(p->dst_md, pd.diff_dst_desc(), engine, true, Arena::kOut);
  p->bwd_wei =
      Port(p->wei_md, pd.weights_desc(), engine, true, Arena::kWeights);
  p->bwd_dsrc = Port(p->src_md, pd.diff_src_desc(), engine, false, Arena::kIn);
  p->bwd_scratch = memory(pd.scratchpad_desc(), engine, DNNL_MEMORY_NONE);
}

// conv(src) * scale[oc] + shift[oc] (+ residual) (then ReLU), for
// evaluation, as conv(src, weight * scale) + shift: the bias is part of the
// kernel, while a per-channel multiply as a binary post-op made the 1x1
// layers of ResNet-50 up to 1.8x slower (kernels:conv_bench, "eval"). The
// sum is a binary post-op and the ReLU an eltwise one, which oneDNN applies
// while the output block is still in registers.
OnednnPlan::Scaled& BuildScaled(OnednnPlan* p, const dnnl::engine& engine,
                                bool residual, bool relu, bool frozen,
                                OnednnAlgorithm algorithm) {
  for (auto& v : p->scaled) {
    if (v.residual == residual && v.relu == relu && v.frozen == frozen &&
        v.algorithm == algorithm) {
      return v;
    }
  }
  dnnl::post_ops ops;
  if (residual) ops.append_binary(dnnl::algorithm::binary_add, p->dst_md);
  if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  const auto pd = Create(algorithm, [&](dnnl::algorithm a) {
    const dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, a, p->src_md, Any(p->wei_md),
        p->bias_md, p->dst_md, p->strides, p->dilates, p->pad_l, p->pad_r);
    return dnnl::convolution_forward::primitive_desc(desc, attr, engine);
  });
  OnednnPlan::Scaled v;
  v.residual = residual;
  v.relu = relu;
  v.frozen = frozen;
  v.algorithm = algorithm;
  v.primitive.emplace(pd);
  v.winograd = IsWinograd(pd);
  v.src = memory(p->src_md, engine, DNNL_MEMORY_NONE);
  v.dst = memory(p->dst_md, engine, DNNL_MEMORY_NONE);
  v.shift = memory(p->bias_md, engine, DNNL_MEMORY_NONE);
  v.sum = memory(p->dst_md, engine, DNNL_MEMORY_NONE);
  // Frozen weights, and Winograd's transformed ones, keep a buffer of their
  // own, which the arena's other users cannot overwrite.
  v.wei = Port(p->wei_md, pd.weights_desc(), engine, true, Arena::kWeights,
               /*own=*/frozen || v.winograd);
  p->scaled.push_back(std::move(v));
  return p->scaled.back();
}

// folded[oc][...] = weight[oc][...] * scale[oc] (groups = 1); whether any
// value of `folded` changed its bits (or its size changed). One pass per
// row: the products go to `row`, and replace the old ones where they differ.
bool FoldScale(const ConvGeometry& g, const float* weight, const float* scale,
               std::vector<float>* folded) {
  const int64_t patch = g.patch();
  bool changed = static_cast<int64_t>(folded->size()) != g.out_channels * patch;
  folded->resize(g.out_channels * patch);
  std::vector<float> row(patch);
  for (int64_t oc = 0; oc < g.out_channels; ++oc) {
    for (int64_t i = 0; i < patch; ++i) {
      row[i] = weight[oc * patch + i] * scale[oc];
    }
    float* to = folded->data() + oc * patch;
    if (std::memcmp(row.data(), to, patch * sizeof(float)) != 0) {
      std::copy(row.begin(), row.end(), to);
      changed = true;
    }
  }
  return changed;
}

}  // namespace

bool OnednnWinogradApplies(const ConvGeometry& g, int64_t block) {
  return block == 16 && g.kernel_h == 3 && g.kernel_w == 3 && g.stride == 1 &&
         g.uniform() && g.pad_h == 1 && g.pad_w == 1 && g.dilation == 1 &&
         g.groups == 1 && g.in_channels % block == 0 &&
         g.out_channels % block == 0;
}

void OnednnScaledForward(const ConvGeometry& g, int64_t block,
                         OnednnAlgorithm algorithm, const float* in,
                         const float* weight, const float* scale,
                         const float* shift, const float* residual, bool relu,
                         bool frozen, float* out, OnednnStatePtr* state) {
  CHECK(block != 0) << "scaled convolutions need channel-blocked activations";
  ApplyOnednnThreads();
  OnednnPlan* p = FindPlan(g, block, state);
  OnednnState& s = **state;
  OnednnPlan::Scaled& v =
      BuildScaled(p, s.engine, residual != nullptr, relu, frozen, algorithm);
  v.src.set_data_handle(const_cast<float*>(in));
  v.dst.set_data_handle(out);
  v.shift.set_data_handle(const_cast<float*>(shift));
  // Frozen weights fold and convert once. Unfrozen ones fold on every call,
  // and Winograd's conversion (a transform that costs up to ten times the
  // convolution at batch 1, kept in a buffer of its own) is reused while
  // the folded weights keep their bits: an evaluation pass during training
  // converts once.
  bool held;
  if (frozen) {
    held = v.converted == weight && v.converted_scale == scale;
    if (!held) FoldScale(g, weight, scale, &v.folded);
  } else {
    // The first fold always changes: `folded` starts empty.
    held = !FoldScale(g, weight, scale, &v.folded) && v.wei.owned;
  }
  if (held) {
    v.wei.BindHeld(v.folded.data());
  } else {
    v.wei.Bind(v.folded.data(), s.stream);
    v.converted = frozen ? weight : nullptr;
    v.converted_scale = frozen ? scale : nullptr;
  }
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, v.src},
                                          {DNNL_ARG_WEIGHTS, v.wei.inner},
                                          {DNNL_ARG_BIAS, v.shift},
                                          {DNNL_ARG_DST, v.dst}};
  if (residual != nullptr) {
    v.sum.set_data_handle(const_cast<float*>(residual));
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, v.sum);
  }
  v.primitive->execute(s.stream, args);
  s.stream.wait();
  s.ran_winograd = v.winograd;
}

void OnednnForward(const ConvGeometry& g, int64_t block,
                   OnednnAlgorithm algorithm, const float* in,
                   const float* weight, const float* bias, float* out,
                   OnednnStatePtr* state) {
  ApplyOnednnThreads();
  OnednnPlan* p = FindPlan(g, block, state);
  OnednnState& s = **state;
  BuildForward(p, s.engine, bias != nullptr, algorithm);
  p->src.Bind(in, s.stream);
  p->wei.Bind(weight, s.stream);
  p->dst.Bind(out, s.stream);
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, p->src.inner},
                                          {DNNL_ARG_WEIGHTS, p->wei.inner},
                                          {DNNL_ARG_DST, p->dst.inner}};
  if (bias != nullptr) {
    p->bias.set_data_handle(const_cast<float*>(bias));
    args.emplace(DNNL_ARG_BIAS, p->bias);
  }
  p->fwd->execute(s.stream, args);
  p->dst.Store(s.stream);
  s.stream.wait();
  s.last_forward = p;
  s.ran_winograd = p->fwd_winograd;
}

bool OnednnRanWinograd(const OnednnStatePtr& state) {
  return state != nullptr && state->ran_winograd;
}

namespace {

// The weight gradient on `stream`, its primitive built for this thread's
// OpenMP count.
void RunBackwardWeights(OnednnPlan* p, const dnnl::engine& engine,
                        dnnl::stream& stream, OnednnAlgorithm algorithm,
                        const float* in, const float* grad_out,
                        float* grad_weight, float* grad_bias) {
  BuildBackwardWeights(p, engine, grad_bias != nullptr, algorithm);
  memory src = p->src.inner;
  if (!p->bww_src_from_fwd) {
    p->bww_src.Bind(in, stream);
    src = p->bww_src.inner;
  }
  p->bww_ddst.Bind(grad_out, stream);
  p->bww_dwei.Bind(grad_weight, stream);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, src},
      {DNNL_ARG_DIFF_DST, p->bww_ddst.inner},
      {DNNL_ARG_DIFF_WEIGHTS, p->bww_dwei.inner}};
  if (p->bww_own_scratch) {
    args.emplace(DNNL_ARG_SCRATCHPAD, BindScratch(p->bww_scratch));
  }
  if (grad_bias != nullptr) {
    p->dbias.set_data_handle(grad_bias);
    args.emplace(DNNL_ARG_DIFF_BIAS, p->dbias);
  }
  p->bww->execute(stream, args);
  p->bww_dwei.Store(stream);
  stream.wait();
}

// The input gradient on `stream` with the primitive BuildBackwardData
// built; `held`: this thread's arena already holds grad_out in the
// primitive's layout.
void RunBackwardData(OnednnPlan* p, dnnl::stream& stream, const float* grad_out,
                     const float* weight, float* grad_in, bool held) {
  if (held) {
    p->bwd_ddst.BindHeld(grad_out);
  } else {
    p->bwd_ddst.Bind(grad_out, stream);
  }
  p->bwd_wei.Bind(weight, stream);
  p->bwd_dsrc.Bind(grad_in, stream);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_DIFF_DST, p->bwd_ddst.inner},
      {DNNL_ARG_WEIGHTS, p->bwd_wei.inner},
      {DNNL_ARG_DIFF_SRC, p->bwd_dsrc.inner}};
  if (p->bwd_own_scratch) {
    args.emplace(DNNL_ARG_SCRATCHPAD, BindScratch(p->bwd_scratch));
  }
  p->bwd->execute(stream, args);
  p->bwd_dsrc.Store(stream);
  stream.wait();
}

}  // namespace

void OnednnBackwardWeights(const ConvGeometry& g, int64_t block,
                           OnednnAlgorithm algorithm, const float* in,
                           const float* grad_out, float* grad_weight,
                           float* grad_bias, OnednnStatePtr* state) {
  ApplyOnednnThreads();
  OnednnPlan* p = FindPlan(g, block, state);
  OnednnState& s = **state;
  CHECK(s.last_forward == p) << "oneDNN weight gradient without its forward";
  RunBackwardWeights(p, s.engine, s.stream, algorithm, in, grad_out,
                     grad_weight, grad_bias);
  // The output gradient's reordered copy stays in the arena's kOut slot
  // until the slot's next write.
  s.held_grad_out = grad_out;
  s.held_plan = p;
  s.held_writes = Arena::Writes(Arena::kOut);
}

void OnednnBackwardInput(const ConvGeometry& g, int64_t block,
                         OnednnAlgorithm algorithm, const float* grad_out,
                         const float* weight, float* grad_in,
                         OnednnStatePtr* state) {
  ApplyOnednnThreads();
  OnednnPlan* p = FindPlan(g, block, state);
  OnednnState& s = **state;
  BuildBackwardData(p, s.engine, algorithm);
  // The layer runs the weight gradient just before, on the same output
  // gradient: when both passes want it in one layout, it is reordered once.
  const bool held =
      s.held_grad_out == grad_out && s.held_plan == p &&
      s.held_writes == Arena::Writes(Arena::kOut) &&
      p->bww_ddst.inner.get_desc() == p->bwd_ddst.inner.get_desc();
  s.held_grad_out = nullptr;
  RunBackwardData(p, s.stream, grad_out, weight, grad_in, held);
}

void OnednnBackwardSideBySide(const ConvGeometry& g, int64_t block,
                              OnednnAlgorithm weights_algorithm,
                              OnednnAlgorithm data_algorithm, const float* in,
                              const float* grad_out, const float* weight,
                              float* grad_weight, float* grad_bias,
                              float* grad_in, OnednnStatePtr* state) {
  ApplyOnednnThreads();
  OnednnPlan* p = FindPlan(g, block, state);
  OnednnState& s = **state;
  CHECK(s.last_forward == p) << "oneDNN weight gradient without its forward";
  s.held_grad_out = nullptr;
  // Each pass touches its own primitive, ports and stream, and each thread
  // its own arena; the forward's plan and saved input are only read.
#pragma omp parallel num_threads(2)
  {
    const OnednnAlone alone;
    ApplyOnednnThreads();
    const int thread = omp_get_thread_num();
    const bool both = omp_get_num_threads() < 2;
    if (thread == 0) {
      RunBackwardWeights(p, s.engine, s.stream, weights_algorithm, in, grad_out,
                         grad_weight, grad_bias);
    }
    if (thread == 1 || both) {
      BuildBackwardData(p, s.engine, data_algorithm);
      RunBackwardData(p, both ? s.stream : s.side_stream, grad_out, weight,
                      grad_in, /*held=*/false);
    }
  }
}

void OnednnBackwardHanded(const ConvGeometry& g, int64_t block,
                          OnednnAlgorithm weights_algorithm,
                          OnednnAlgorithm data_algorithm, const float* in,
                          const float* grad_out, const float* weight,
                          float* grad_weight, float* grad_bias, float* grad_in,
                          OnednnStatePtr* state, BackwardHelper& helper) {
  ApplyOnednnThreads();
  OnednnPlan* p = FindPlan(g, block, state);
  OnednnState* s = state->get();
  CHECK(s->last_forward == p) << "oneDNN weight gradient without its forward";
  s->held_grad_out = nullptr;
  // As side by side: the helper touches the weight gradient's primitive,
  // ports and `stream`, this thread the input gradient's and `side_stream`.
  helper.Push([=] {
    RunBackwardWeights(p, s->engine, s->stream, weights_algorithm, in, grad_out,
                       grad_weight, grad_bias);
  });
  if (grad_in == nullptr) return;
  BuildBackwardData(p, s->engine, data_algorithm);
  RunBackwardData(p, s->side_stream, grad_out, weight, grad_in,
                  /*held=*/false);
}

}  // namespace conv_internal
}  // namespace cohort
