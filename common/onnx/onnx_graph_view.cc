#include "common/onnx/onnx_graph_view.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/half.h"
#include "common/status_macros.h"

namespace cohort {
namespace onnx_import_internal {
namespace {

absl::Status Bad(const std::string& what, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
}

// Little-endian items of `raw` as T (the hosts cohort runs on are
// little-endian, as ONNX's raw_data is).
template <typename T>
std::vector<T> RawItems(const std::string& raw) {
  std::vector<T> out(raw.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), raw.data(), out.size() * sizeof(T));
  return out;
}

// The float values of `t`, any storage ONNX allows for its type.
absl::StatusOr<std::vector<float>> Floats(const onnx::TensorProto& t) {
  const bool raw = t.has_raw_data();
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      if (raw) return RawItems<float>(t.raw_data());
      return std::vector<float>(t.float_data().begin(), t.float_data().end());
    case onnx::TensorProto::DOUBLE: {
      std::vector<double> d = raw ? RawItems<double>(t.raw_data())
                                  : std::vector<double>(t.double_data().begin(),
                                                        t.double_data().end());
      return std::vector<float>(d.begin(), d.end());
    }
    case onnx::TensorProto::FLOAT16: {
      std::vector<float> out;
      if (raw) {
        for (uint16_t h : RawItems<uint16_t>(t.raw_data())) {
          out.push_back(HalfToFloat(h));
        }
      } else {
        for (int32_t h : t.int32_data()) out.push_back(HalfToFloat(h));
      }
      return out;
    }
    default:
      return Bad(absl::StrCat("tensor ", t.name()),
                 absl::StrCat("element type ", t.data_type(),
                              " is not a number cohort reads (float32, "
                              "float64, float16, int64, int32, bool)"));
  }
}

// The integer values of `t` (INT64, INT32 or BOOL).
std::vector<int64_t> Ints(const onnx::TensorProto& t) {
  const bool raw = t.has_raw_data();
  switch (t.data_type()) {
    case onnx::TensorProto::INT64:
      if (raw) return RawItems<int64_t>(t.raw_data());
      return {t.int64_data().begin(), t.int64_data().end()};
    case onnx::TensorProto::INT32: {
      if (!raw) return {t.int32_data().begin(), t.int32_data().end()};
      std::vector<int32_t> v = RawItems<int32_t>(t.raw_data());
      return {v.begin(), v.end()};
    }
    default: {  // BOOL
      if (!raw) return {t.int32_data().begin(), t.int32_data().end()};
      std::vector<uint8_t> v = RawItems<uint8_t>(t.raw_data());
      return {v.begin(), v.end()};
    }
  }
}

bool IsIntType(int type) {
  return type == onnx::TensorProto::INT64 || type == onnx::TensorProto::INT32 ||
         type == onnx::TensorProto::BOOL;
}

}  // namespace

std::string NodeLabel(const onnx::NodeProto& node, int index) {
  const std::string name =
      node.name().empty() ? absl::StrCat("#", index) : node.name();
  return absl::StrCat("node ", name, " (", node.op_type(), ")");
}

absl::StatusOr<ConstTensor> ReadTensor(const onnx::TensorProto& t) {
  const std::string what = absl::StrCat("tensor ", t.name());
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    return Bad(what,
               "its data lies in an external file; export the model as one "
               "file (torch.onnx.export of a model under 2 GB)");
  }
  ConstTensor c;
  int64_t count = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && count > (int64_t{1} << 40) / d)) {
      return Bad(what, "its dims are negative or too large");
    }
    c.dims.push_back(d);
    count *= d;
  }
  c.integer = IsIntType(t.data_type());
  if (c.integer) {
    c.ints = Ints(t);
  } else {
    ASSIGN_OR_RETURN(c.floats, Floats(t));
  }
  if (c.size() != count) {
    return Bad(what, absl::StrCat("holds ", c.size(), " values where its dims",
                                  " make ", count));
  }
  return c;
}

absl::StatusOr<GraphView> GraphView::Build(const onnx::GraphProto& graph,
                                           const std::string& input) {
  GraphView view;
  view.graph_ = &graph;
  view.input_ = input;
  RETURN_IF_ERROR(view.Index());
  RETURN_IF_ERROR(view.Sort());
  return view;
}

absl::Status GraphView::Index() {
  for (const onnx::TensorProto& t : graph_->initializer()) {
    initializers_[t.name()] = &t;
  }
  std::set<std::string> defined(
      {input_});  // initializers may shadow graph inputs (old IR versions)
  for (const auto& [name, t] : initializers_) defined.insert(name);
  for (int i = 0; i < num_nodes(); ++i) {
    const onnx::NodeProto& n = node(i);
    for (int o = 0; o < n.output_size(); ++o) {
      if (n.output(o).empty()) continue;
      if (!defined.insert(n.output(o)).second) {
        return Bad(Label(i), absl::StrCat("its output ", n.output(o),
                                          " is defined twice in the graph"));
      }
      producer_[n.output(o)] = {i, o};
    }
  }
  for (int i = 0; i < num_nodes(); ++i) {
    for (const std::string& in : node(i).input()) {
      if (in.empty()) continue;  // an optional input left out
      if (defined.count(in) == 0) {
        return Bad(Label(i),
                   absl::StrCat("reads ", in,
                                ", which is neither the graph's input, an "
                                "initializer nor any node's output"));
      }
      consumers_[in].push_back(i);
    }
  }
  return absl::OkStatus();
}

absl::Status GraphView::Sort() {
  // Kahn's algorithm; a node left over sits on a cycle.
  std::vector<int> pending(num_nodes(), 0);
  std::deque<int> ready;
  for (int i = 0; i < num_nodes(); ++i) {
    for (const std::string& in : node(i).input()) {
      if (producer_.count(in)) ++pending[i];
    }
    if (pending[i] == 0) ready.push_back(i);
  }
  rank_.assign(num_nodes(), -1);
  data_node_.assign(num_nodes(), false);
  while (!ready.empty()) {
    const int i = ready.front();
    ready.pop_front();
    rank_[i] = static_cast<int>(topo_.size());
    topo_.push_back(i);
    const std::string& op = node(i).op_type();
    if (op != "Shape" && op != "Size") {
      for (const std::string& in : node(i).input()) {
        if (!in.empty() && IsData(in)) data_node_[i] = true;
      }
    }
    for (const std::string& out : node(i).output()) {
      auto it = consumers_.find(out);
      if (out.empty() || it == consumers_.end()) continue;
      for (int c : it->second) {
        if (--pending[c] == 0) ready.push_back(c);
      }
    }
  }
  for (int i = 0; i < num_nodes(); ++i) {
    if (rank_[i] < 0) return Bad(Label(i), "it lies on a cycle of the graph");
  }
  return absl::OkStatus();
}

bool GraphView::IsData(const std::string& value) const {
  if (value == input_) return true;
  auto it = producer_.find(value);
  return it != producer_.end() && data_node_[it->second.first];
}

int GraphView::Producer(const std::string& value) const {
  auto it = producer_.find(value);
  return it == producer_.end() ? -1 : it->second.first;
}

std::vector<int> GraphView::DataConsumers(const std::string& value) const {
  std::vector<int> out;
  auto it = consumers_.find(value);
  if (it == consumers_.end()) return out;
  for (int c : it->second) {
    if (data_node_[c] && std::find(out.begin(), out.end(), c) == out.end()) {
      out.push_back(c);
    }
  }
  std::sort(out.begin(), out.end(),
            [&](int a, int b) { return rank_[a] < rank_[b]; });
  return out;
}

std::vector<std::string> GraphView::DataInputs(int i) const {
  std::vector<std::string> out;
  for (const std::string& in : node(i).input()) {
    if (!in.empty() && IsData(in)) out.push_back(in);
  }
  return out;
}

const std::vector<int64_t>* GraphView::ShapeOf(const std::string& v) const {
  auto it = shapes_.find(v);
  return it == shapes_.end() ? nullptr : &it->second;
}

absl::StatusOr<ConstTensor> GraphView::Fold(const std::string& value) {
  auto done = folded_.find(value);
  if (done != folded_.end()) return done->second;
  ConstTensor c;
  if (auto it = initializers_.find(value); it != initializers_.end()) {
    ASSIGN_OR_RETURN(c, ReadTensor(*it->second));
  } else {
    auto p = producer_.find(value);
    if (p == producer_.end() || IsData(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("value ", value,
                       " depends on the input's data where a constant "
                       "is needed"));
    }
    ASSIGN_OR_RETURN(c, FoldNode(p->second.first, p->second.second));
  }
  folded_[value] = c;
  return c;
}

}  // namespace onnx_import_internal
}  // namespace cohort
