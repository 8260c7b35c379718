// The backward passes of kernels/conv_onednn.h: the weight and input
// gradients, in turn, side by side on a team of two, or handed to a
// BackwardHelper.
#include <omp.h>

#include <cstddef>
#include <unordered_map>

#include "common/logging.h"
#include "dnnl.hpp"
#include "kernels/backward_helper.h"
#include "kernels/conv_onednn.h"
#include "kernels/conv_onednn_plan.h"
#include "kernels/onednn_threads.h"

namespace cohort {
namespace conv_internal {
namespace {

// A primitive built inside an OpenMP team takes its scratchpad from the
// caller (BindScratch).
bool OwnScratch() { return omp_in_parallel(); }

dnnl::primitive_attr ScratchpadAttr(bool own) {
  dnnl::primitive_attr attr;
  if (own) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// What a backward primitive built here and now would be built for.
OnednnPlan::BuiltFor BuiltNow(OnednnAlgorithm algorithm, bool bias) {
  OnednnPlan::BuiltFor b;
  b.algorithm = algorithm;
  b.threads = omp_get_max_threads();
  b.own_scratch = OwnScratch();
  b.bias = bias;
  return b;
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
  const OnednnPlan::BuiltFor now = BuiltNow(algorithm, bias);
  if (p->bww && p->bww_for == now) return;
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
        desc, ScratchpadAttr(now.own_scratch), engine, hint);
  });
  p->bww.emplace(pd);
  p->bww_for = now;
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
  const OnednnPlan::BuiltFor now = BuiltNow(algorithm, /*bias=*/false);
  if (p->bwd && p->bwd_for == now) return;
  const auto& hint = ForwardPd(p, engine, p->fwd_bias, p->fwd_algorithm);
  const memory::desc any_src = Act(*p, p->src_md);
  const memory::desc any_dst = Act(*p, p->dst_md);
  const memory::desc any_wei = Any(p->wei_md);
  const auto pd = Create(algorithm, [&](dnnl::algorithm a) {
    const dnnl::convolution_backward_data::desc desc(
        a, any_src, any_wei, any_dst, p->strides, p->dilates, p->pad_l,
        p->pad_r);
    return dnnl::convolution_backward_data::primitive_desc(
        desc, ScratchpadAttr(now.own_scratch), engine, hint);
  });
  p->bwd.emplace(pd);
  p->bwd_for = now;
  p->bwd_ddst = Port(p->dst_md, pd.diff_dst_desc(), engine, true, Arena::kOut);
  p->bwd_wei =
      Port(p->wei_md, pd.weights_desc(), engine, true, Arena::kWeights);
  p->bwd_dsrc = Port(p->src_md, pd.diff_src_desc(), engine, false, Arena::kIn);
  p->bwd_scratch = memory(pd.scratchpad_desc(), engine, DNNL_MEMORY_NONE);
}

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
  if (p->bww_for.own_scratch) {
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
  if (p->bwd_for.own_scratch) {
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
