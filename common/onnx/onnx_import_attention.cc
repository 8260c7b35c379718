// The importer's self-attention: the nodes from an [N, L, D] value to the
// first single value after an out-projection that follows a Softmax
// become one `attention` layer when evaluating them (onnx_eval.h) on a
// fixed pseudo-random input gives what cohort's attention computes with
// the block's weights: one in-projection {3D, D} whose rows are Q, K and V,
// H heads of D/H features, scores scaled by 1/sqrt(D/H), causal or not,
// softmax, out-projection {D, D}. Torch spells the same block many ways
// (nn.MultiheadAttention, a GPT's c_attn split three ways, masks as Where
// or Add); comparing numbers instead of node patterns takes them all and
// refuses, naming the Softmax, any block that computes something else.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/onnx/onnx_eval.h"
#include "common/onnx/onnx_importer.h"
#include "common/status_macros.h"

namespace cohort {
namespace onnx_import_internal {
namespace {

// An attention block is recognised by evaluating it at the batch and length
// it was exported with; a block too large for the evaluator's limits is
// refused with the remedy, not only the limit.
absl::Status EvalRefusal(const std::string& label, const absl::Status& why) {
  return absl::InvalidArgumentError(absl::StrCat(
      label, ": cannot evaluate the attention block to recognise it (",
      why.message(),
      "); export with a smaller batch (torch.onnx.export with a batch of 1 "
      "or 2)"));
}

absl::Status Refuse(const std::string& label, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(label, ": ", why));
}

// The data operators an attention block is spelled with.
bool AttentionOp(const std::string& op) {
  static const auto* ops = new std::set<std::string>{
      "Transpose", "MatMul",   "Gemm",    "Add",       "Mul",
      "Div",       "Reshape",  "Squeeze", "Unsqueeze", "Gather",
      "Split",     "Slice",    "Concat",  "Softmax",   "Dropout",
      "Where",     "Identity", "Cast",    "Sub",       "Expand"};
  return ops->count(op) > 0;
}

// Operators that only move or relabel values after the out-projection.
bool LayoutOp(const std::string& op) {
  return op == "Reshape" || op == "Transpose" || op == "Squeeze" ||
         op == "Unsqueeze" || op == "Identity";
}

// x [N, L, D] -> softmax(Q K^T / sqrt(D/H), causal) V, out-projected, in
// double: cohort's attention (worker/layers/attention.h).
std::vector<double> Reference(const std::vector<double>& x, int64_t n,
                              int64_t len, int64_t d, int64_t heads,
                              bool causal, const AttentionWeights& w) {
  const int64_t hd = d / heads;
  std::vector<double> qkv(n * len * 3 * d), mixed(n * len * d),
      out(n * len * d);
  for (int64_t t = 0; t < n * len; ++t) {
    for (int64_t o = 0; o < 3 * d; ++o) {
      double s = w.in_bias.floats[o];
      for (int64_t i = 0; i < d; ++i) {
        s += w.in.floats[o * d + i] * x[t * d + i];
      }
      qkv[t * 3 * d + o] = s;
    }
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<double> p(len);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < len; ++i) {
        const double* q = &qkv[((b * len + i) * 3) * d + h * hd];
        const int64_t last = causal ? i : len - 1;
        double top = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= last; ++j) {
          const double* k = &qkv[((b * len + j) * 3 + 1) * d + h * hd];
          double s = 0;
          for (int64_t e = 0; e < hd; ++e) s += q[e] * k[e];
          p[j] = s * scale;
          top = std::max(top, p[j]);
        }
        for (int64_t j = 0; j <= last; ++j) sum += p[j] = std::exp(p[j] - top);
        for (int64_t e = 0; e < hd; ++e) {
          double s = 0;
          for (int64_t j = 0; j <= last; ++j) {
            s += p[j] * qkv[((b * len + j) * 3 + 2) * d + h * hd + e];
          }
          mixed[(b * len + i) * d + h * hd + e] = s / sum;
        }
      }
    }
  }
  for (int64_t t = 0; t < n * len; ++t) {
    for (int64_t o = 0; o < d; ++o) {
      double s = w.out_bias.floats[o];
      for (int64_t i = 0; i < d; ++i) {
        s += w.out.floats[o * d + i] * mixed[t * d + i];
      }
      out[t * d + o] = s;
    }
  }
  return out;
}

// Whether every probability above the diagonal of the [..., L, L] softmax
// output is zero.
bool Causal(const EvalValue& p, int64_t len) {
  if (len < 2) return false;
  for (size_t base = 0; base < p.data.size(); base += len * len) {
    for (int64_t i = 0; i < len; ++i) {
      for (int64_t j = i + 1; j < len; ++j) {
        if (p.data[base + i * len + j] != 0) return false;
      }
    }
  }
  return true;
}

}  // namespace

// The nodes of an attention block starting at `w`, in topological order,
// or an empty block when the nodes after `w` are not one.
AttentionBlock Importer::FindAttention(const std::string& w,
                                       const Region& r) const {
  AttentionBlock block;
  std::map<std::string, int> live = {{w, static_cast<int>(Next(w, r).size())}};
  std::set<int> inside;
  std::vector<char> reach(g_.num_nodes(), 0);
  for (int c : Next(w, r)) reach[c] = 1;
  for (int node : g_.topo_order()) {
    if (!reach[node]) continue;
    const onnx::NodeProto& n = g_.node(node);
    const bool after = block.softmax >= 0;
    if (!AttentionOp(n.op_type()) ||
        (after && block.out_proj >= 0 && !LayoutOp(n.op_type()) &&
         !(n.op_type() == "Add" && g_.DataInputs(node).size() == 1)) ||
        (n.op_type() == "Softmax" && after)) {
      break;
    }
    for (const std::string& in : g_.DataInputs(node)) {
      if (live.count(in) == 0) return {};  // reads a value from outside
      if (--live[in] == 0) live.erase(in);
    }
    block.nodes.push_back(node);
    if (n.op_type() == "Softmax") block.softmax = node;
    const bool projects = (n.op_type() == "MatMul" || n.op_type() == "Gemm") &&
                          g_.DataInputs(node).size() == 1;
    if (projects) (after ? block.out_proj : block.in_proj) = node;
    for (const std::string& o : n.output()) {
      const std::vector<int> users = g_.DataConsumers(o);
      for (int u : users) reach[u] = (*r.allowed)[u];
      if (!users.empty()) live[o] = static_cast<int>(users.size());
    }
    if (live.size() == 1 && block.out_proj >= 0) {
      block.ends.push_back(live.begin()->first);
    }
  }
  if (block.ends.empty() || block.in_proj < 0) return {};
  return block;
}

absl::StatusOr<std::string> Importer::TryAttention(const std::string& w,
                                                   const Region& r,
                                                   bool* matched) {
  *matched = false;
  const Dims* in = g_.ShapeOf(w);
  if (!tokens_ || in == nullptr || in->size() != 2) return std::string();
  const AttentionBlock block = FindAttention(w, r);
  if (block.nodes.empty()) return std::string();
  *matched = true;
  const std::string label = g_.Label(block.softmax);
  ASSIGN_OR_RETURN(const AttentionWeights weights,
                   ReadAttentionWeights(block, (*in)[1]));
  // The batch torch traced into the graph's shape constants.
  const int64_t n = export_batch_ > 0 ? export_batch_ : 2;
  const int64_t len = (*in)[0], d = (*in)[1];
  EvalValue x;
  x.dims = {n, len, d};
  std::mt19937_64 gen(0x5eed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t i = 0; i < n * len * d; ++i) x.data.push_back(normal(gen));
  Evaluator eval(g_.graph(), opset_);
  // Token ids of the exported shape, for shape arithmetic that reads them.
  EvalValue ids;
  ids.dims = {n, len};
  ids.data.assign(n * len, 0.0);
  ids.integer = true;
  eval.Set(g_.input(), ids);
  eval.Set(w, x);
  absl::StatusOr<EvalValue> scores = eval.Get(g_.node(block.softmax).output(0));
  if (!scores.ok()) return EvalRefusal(label, scores.status());
  const EvalValue& p = *scores;
  const int64_t heads =
      static_cast<int64_t>(p.data.size()) / std::max<int64_t>(1, n * len * len);
  if (heads < 1 || d % heads != 0 ||
      heads * n * len * len != static_cast<int64_t>(p.data.size())) {
    return Refuse(label, absl::StrCat("its scores ", DimsString(p.dims),
                                      " are not [N, heads, L, L] for L = ", len,
                                      " and heads dividing D = ", d));
  }
  const bool causal = Causal(p, len);
  const std::vector<double> want =
      Reference(x.data, n, len, d, heads, causal, weights);
  ASSIGN_OR_RETURN(const std::string end,
                   MatchingEnd(block, &eval, want, {n, len, d}, label));
  ASSIGN_OR_RETURN(const float dropout, AttentionDropout(block));
  AttentionSpec* a = NewLayer(r)->mutable_attention();
  a->set_heads(static_cast<int32_t>(heads));
  a->set_bidirectional(!causal);
  a->set_dropout(dropout);
  AddAttentionWeights(weights, r);
  g_.SetShape(end, *in);
  return end;
}

absl::StatusOr<std::string> Importer::MatchingEnd(
    const AttentionBlock& block, Evaluator* eval,
    const std::vector<double>& want, const Dims& shape,
    const std::string& label) {
  double scale = 1e-12, worst = INFINITY;
  for (double v : want) scale = std::max(scale, std::abs(v));
  // The last candidate that is [N, L, D] again (after the reshapes that
  // undo the heads' layout).
  for (auto end = block.ends.rbegin(); end != block.ends.rend(); ++end) {
    absl::StatusOr<EvalValue> got = eval->Get(*end);
    if (!got.ok()) return EvalRefusal(label, got.status());
    const EvalValue& y = *got;
    if (y.dims != shape) continue;
    double diff = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      diff = std::max(diff, std::abs(y.data[i] - want[i]));
    }
    if (diff <= 1e-5 * scale) return *end;
    worst = std::min(worst, diff);
  }
  return Refuse(
      label,
      absl::StrFormat(
          "the block around it is not self-attention as cohort computes it "
          "(Q, K and V from one in-projection in that order, heads of D/H "
          "features, scores scaled by 1/sqrt(D/H), an optional causal mask, "
          "then the out-projection): largest difference %.3g of %.3g",
          worst, scale));
}

absl::StatusOr<float> Importer::AttentionDropout(const AttentionBlock& block) {
  float p = 0;
  for (int node : block.nodes) {
    const onnx::NodeProto& n = g_.node(node);
    if (n.op_type() != "Dropout") continue;
    if (n.input(0) != g_.node(block.softmax).output(0)) {
      return Refuse(g_.Label(node),
                    "dropout inside an attention block other than on its "
                    "probabilities; cohort's attention drops probabilities "
                    "only");
    }
    p = FloatAttr(n, "ratio", 0.5f);
    if (n.input_size() > 1 && !n.input(1).empty()) {
      ASSIGN_OR_RETURN(const ConstTensor t, Weight(node, 1, {}));
      p = static_cast<float>(t.At(0));
    }
  }
  return p;
}

absl::StatusOr<AttentionWeights> Importer::ReadAttentionWeights(
    const AttentionBlock& block, int64_t d) {
  AttentionWeights w;
  ASSIGN_OR_RETURN(w.in, ProjectionWeight(block.in_proj, &w.in_bias));
  ASSIGN_OR_RETURN(w.out, ProjectionWeight(block.out_proj, &w.out_bias));
  if (w.in.dims != Dims{3 * d, d} || w.out.dims != Dims{d, d} ||
      w.in_bias.size() != 3 * d || w.out_bias.size() != d) {
    return Refuse(
        g_.Label(block.softmax),
        absl::StrCat("its projections ", DimsString(w.in.dims), " and ",
                     DimsString(w.out.dims),
                     " (with biases) are not one "
                     "in-projection [3D, D] and one out-projection [D, D] "
                     "for D = ",
                     d,
                     "; cohort's attention holds "
                     "nn.MultiheadAttention's fused in_proj (or a Linear(D, "
                     "3D) split into Q, K and V), with biases"));
  }
  w.in_bias.dims = {3 * d};
  w.out_bias.dims = {d};
  return w;
}

absl::StatusOr<ConstTensor> Importer::ProjectionWeight(int node,
                                                       ConstTensor* bias) {
  const onnx::NodeProto& n = g_.node(node);
  if (n.op_type() == "Gemm") {
    if (IntAttr(n, "transB", 0) != 1 || IntAttr(n, "transA", 0) != 0 ||
        n.input_size() < 3 || n.input(2).empty()) {
      return Refuse(g_.Label(node), "not x @ W^T + b");
    }
    ASSIGN_OR_RETURN(*bias, Weight(node, 2, {}));
    return Weight(node, 1, {});
  }
  ASSIGN_OR_RETURN(ConstTensor w, LinearWeight(node, 1));
  const std::vector<int> users = g_.DataConsumers(n.output(0));
  const int add = users.size() == 1 ? users[0] : -1;
  if (add < 0 || g_.node(add).op_type() != "Add" ||
      g_.DataInputs(add).size() != 1) {
    return Refuse(g_.Label(node),
                  "a projection without a bias; cohort's "
                  "attention carries biases");
  }
  ASSIGN_OR_RETURN(*bias, Operand(add, n.output(0), {w.dims[0]}));
  return w;
}

void Importer::AddAttentionWeights(const AttentionWeights& w, const Region& r) {
  AddWeight(r, "in_proj_weight", w.in);
  AddWeight(r, "in_proj_bias", w.in_bias);
  AddWeight(r, "out_proj.weight", w.out);
  AddWeight(r, "out_proj.bias", w.out_bias);
  LayerSpec* layer = r.seq.layers->Mutable(r.seq.layers->size() - 1);
  if (!layer->name().empty()) return;
  // Parameters from two modules (a GPT's c_attn and c_proj): each tensor
  // keeps its own name.
  const std::pair<const char*, const ConstTensor*> params[] = {
      {"in_proj_weight", &w.in},
      {"in_proj_bias", &w.in_bias},
      {"out_proj.weight", &w.out},
      {"out_proj.bias", &w.out_bias}};
  for (const auto& [param, t] : params) {
    if (!t->source.empty()) (*layer->mutable_tensor_names())[param] = t->source;
  }
}

}  // namespace onnx_import_internal
}  // namespace cohort
