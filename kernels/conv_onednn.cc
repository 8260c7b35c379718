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
#include "kernels/blocked_weights.h"
#include "kernels/conv_onednn_plan.h"

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

void OnednnStateDeleter::operator()(OnednnState* state) const { delete state; }

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

namespace {

constexpr size_t kMaxPlans = 4;

bool IsWinograd(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).find("wino") != std::string::npos;
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

}  // namespace

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

namespace {

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

}  // namespace conv_internal
}  // namespace cohort
