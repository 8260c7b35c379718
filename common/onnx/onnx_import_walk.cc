// The importer's walk: a chain of layers, where a value read by several
// nodes opens a branch that closes at the first node every path from it
// passes through (its immediate post-dominator), which must be an Add, a
// Sum or a Concat along the channels.
#include <algorithm>
#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/broadcast.h"
#include "common/onnx/onnx_importer.h"
#include "common/status_macros.h"

namespace cohort {
namespace onnx_import_internal {
namespace {

constexpr char kSeriesParallel[] =
    "cohort takes series-parallel graphs: a tensor may fork into paths that "
    "meet again at one Add (branch SUM), one Mul (branch MUL) or one Concat "
    "along the channels (branch CONCAT)";

}  // namespace

std::string DimsString(const Dims& d) {
  return absl::StrCat("[", absl::StrJoin(d, ", "), "]");
}

std::vector<int> Importer::Next(const std::string& value,
                                const Region& r) const {
  std::vector<int> out;
  for (int c : g_.DataConsumers(value)) {
    if ((*r.allowed)[c]) out.push_back(c);
  }
  return out;
}

absl::Status Importer::MapChain(const std::string& from, const Region& r) {
  std::string w = from;
  while (w != r.to) {
    const std::vector<int> next = Next(w, r);
    if (next.empty()) {
      return absl::InternalError(
          absl::StrCat("no path from ", w, " to ", r.to));
    }
    bool matched = false;
    ASSIGN_OR_RETURN(std::string fused, TryFused(w, r, &matched));
    if (matched) {
      w = fused;
      continue;
    }
    const std::vector<std::string> ins = g_.DataInputs(next[0]);
    if (next.size() == 1 && ins.size() == 1) {
      ASSIGN_OR_RETURN(w, MapNode(next[0], r));
      continue;
    }
    if (next.size() == 1 &&
        std::any_of(ins.begin(), ins.end(),
                    [&](const std::string& v) { return v != w; })) {
      return absl::InvalidArgumentError(absl::StrCat(
          g_.Label(next[0]), ": joins ", w,
          " with a tensor from outside its block; ", kSeriesParallel));
    }
    ASSIGN_OR_RETURN(w, MapFork(w, r));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Importer::MapNode(int node, const Region& r) {
  const Mapper mapper = FindMapper(g_.node(node).op_type());
  if (mapper == nullptr) {
    const std::string& op = g_.node(node).op_type();
    const std::string hint = UnsupportedHint(op);
    return absl::InvalidArgumentError(absl::StrCat(
        g_.Label(node), ": cohort has no layer for ONNX's ", op, "; ",
        hint.empty() ? "`cohort layers` lists the layer kinds" : hint));
  }
  if (tokens_) RETURN_IF_ERROR(CheckTokenOp(node));
  RETURN_IF_ERROR(CheckSideOutputs(node, r));
  return (this->*mapper)(node, r);
}

absl::Status Importer::CheckSideOutputs(int node, const Region& r) const {
  const onnx::NodeProto& n = g_.node(node);
  for (int o = 1; o < n.output_size(); ++o) {
    if (n.output(o).empty()) continue;
    const std::vector<int> users = Next(n.output(o), r);
    if (!users.empty() || n.output(o) == r.to) {
      return absl::InvalidArgumentError(absl::StrCat(
          g_.Label(node), ": its output ", n.output(o), " is used",
          users.empty() ? "" : absl::StrCat(" by ", g_.Label(users[0])),
          "; cohort's layers have one output"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Importer::MapFork(const std::string& w,
                                              const Region& r) {
  // The allowed nodes reachable from w.
  std::vector<char> reach(g_.num_nodes(), 0);
  std::deque<std::string> todo = {w};
  while (!todo.empty()) {
    const std::string v = todo.front();
    todo.pop_front();
    for (int c : Next(v, r)) {
      if (reach[c]) continue;
      reach[c] = 1;
      for (const std::string& o : g_.node(c).output()) todo.push_back(o);
    }
  }
  ASSIGN_OR_RETURN(const int join, FindJoin(w, r, reach));
  const onnx::NodeProto& j = g_.node(join);
  const bool sum = j.op_type() == "Add" || j.op_type() == "Sum";
  const bool mul = j.op_type() == "Mul";
  const bool concat = j.op_type() == "Concat";
  if (!sum && !mul && !concat) {
    return absl::InvalidArgumentError(
        absl::StrCat(g_.Label(join), ": it joins paths that fork at ", w, "; ",
                     kSeriesParallel,
                     " (SiLU's x * sigmoid(x) and GELU's erf form are "
                     "recognised as layers)"));
  }
  ASSIGN_OR_RETURN(const std::vector<std::vector<char>> sets,
                   PathSets(w, join, reach));
  RETURN_IF_ERROR(CheckSideOutputs(join, r));
  const int index = r.seq.layers->size();
  BranchSpec* branch = NewLayer(r)->mutable_branch();
  const BranchSpec::Combine combine = sum   ? BranchSpec::SUM
                                      : mul ? BranchSpec::MUL
                                            : BranchSpec::CONCAT;
  branch->set_combine(combine);
  const std::vector<std::string> ends = g_.DataInputs(join);
  for (size_t p = 0; p < ends.size(); ++p) {
    BranchSpec::Path* path = branch->add_paths();
    Region sub{ends[p], &sets[p],
               Seq{path->mutable_layers(),
                   absl::StrCat(r.seq.prefix, index, ".paths.", p, ".")}};
    RETURN_IF_ERROR(MapChain(w, sub));
  }
  RETURN_IF_ERROR(JoinShapes(join, combine, ends));
  return j.output(0);
}

absl::StatusOr<int> Importer::FindJoin(const std::string& w, const Region& r,
                                       const std::vector<char>& reach) {
  const int target = g_.Producer(r.to);
  for (int n : g_.topo_order()) {
    if (!reach[n] || g_.DataInputs(n).size() < 2) continue;
    if (n == target) return n;
    // n is the join when no path from w reaches `to` around it.
    std::vector<char> seen(g_.num_nodes(), 0);
    std::deque<std::string> todo = {w};
    bool around = false;
    while (!todo.empty() && !around) {
      const std::string v = todo.front();
      todo.pop_front();
      for (int c : Next(v, r)) {
        if (c == n || seen[c]) continue;
        seen[c] = 1;
        if (c == target) around = true;
        for (const std::string& o : g_.node(c).output()) todo.push_back(o);
      }
    }
    if (!around) return n;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "value ", w, " forks into paths that never meet; ", kSeriesParallel));
}

absl::StatusOr<std::vector<std::vector<char>>> Importer::PathSets(
    const std::string& w, int join, const std::vector<char>& reach) {
  std::vector<std::vector<char>> sets;
  std::vector<int> owner(g_.num_nodes(), -1);
  for (const std::string& end : g_.DataInputs(join)) {
    std::vector<char> set(g_.num_nodes(), 0);
    std::deque<int> todo;
    if (end != w) todo.push_back(g_.Producer(end));
    while (!todo.empty()) {
      const int n = todo.front();
      todo.pop_front();
      if (n < 0 || !reach[n] || set[n]) continue;
      set[n] = 1;
      if (owner[n] >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(g_.Label(n), ": feeds two paths that meet at ",
                         g_.Label(join), "; ", kSeriesParallel));
      }
      owner[n] = static_cast<int>(sets.size());
      for (const std::string& in : g_.DataInputs(n)) {
        if (in != w) todo.push_back(g_.Producer(in));
      }
    }
    sets.push_back(std::move(set));
  }
  // No path may leak a tensor past the join.
  for (int n = 0; n < g_.num_nodes(); ++n) {
    if (owner[n] < 0) continue;
    for (const std::string& o : g_.node(n).output()) {
      for (int c : g_.DataConsumers(o)) {
        if (c != join && reach[c] && owner[c] != owner[n]) {
          return absl::InvalidArgumentError(
              absl::StrCat(g_.Label(c), ": reads ", o,
                           " from inside the block that ends at ",
                           g_.Label(join), "; ", kSeriesParallel));
        }
      }
    }
  }
  return sets;
}

absl::Status Importer::JoinShapes(int join, BranchSpec::Combine combine,
                                  const std::vector<std::string>& ends) {
  const std::string label = g_.Label(join);
  const bool concat = combine == BranchSpec::CONCAT;
  Dims out = *g_.ShapeOf(ends[0]);
  if (concat) {
    int64_t axis = IntAttr(g_.node(join), "axis", 1);
    if (axis < 0) axis += static_cast<int64_t>(out.size()) + 1;
    if (axis != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": concatenates along axis ",
          IntAttr(g_.node(join), "axis", 1),
          "; cohort's branch CONCAT joins along the channels (axis 1)"));
    }
  }
  for (size_t p = 1; p < ends.size(); ++p) {
    const Dims& s = *g_.ShapeOf(ends[p]);
    // A MUL branch broadcasts a [C, 1, 1] gate over [C, H, W], as the
    // engines' branch layers do (common/broadcast.h).
    const bool fits =
        concat ? s.size() == out.size() &&
                     std::equal(s.begin() + 1, s.end(), out.begin() + 1)
        : combine == BranchSpec::MUL ? FitsProduct(s, &out)
                                     : s == out;
    if (!fits) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": its inputs' shapes ", DimsString(out), " and ",
          DimsString(s), concat ? " differ beyond the channels" : " differ",
          combine == BranchSpec::MUL
              ? " (cohort broadcasts only [C, 1, 1] over [C, H, W])"
              : " (cohort does not broadcast)"));
    }
    if (concat) out[0] += s[0];
  }
  g_.SetShape(g_.node(join).output(0), out);
  return absl::OkStatus();
}

}  // namespace onnx_import_internal
}  // namespace cohort
