#include "worker/engine/model_state.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"

namespace cohort {

std::vector<int64_t> PaddedParamSizes(Model<float>& model) {
  const auto& entries = model.param_store().entries();
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < entries.size(); ++i) {
    const int64_t end =
        i + 1 < entries.size() ? entries[i + 1].offset : model.params().size();
    sizes.push_back(end - entries[i].offset);
  }
  return sizes;
}

void AppendBufferLayout(Model<float>& model, StateLayoutEntries* layout) {
  const std::vector<Tensor*> buffers = model.Buffers();
  for (size_t i = 0; i < buffers.size(); ++i) {
    layout->emplace_back(absl::StrCat("buffer.", i), buffers[i]->size());
  }
}

std::string StateNamesJson(const Model<float>& model) {
  auto shape = [](const Shape& s) {
    return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
  };
  std::string out = "{\"params\": [";
  const auto& entries = model.param_store().entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", "{\"name\": ",
                    JsonString(model.TensorName(entries[i].name)),
                    ", \"shape\": ", shape(entries[i].shape),
                    ", \"offset\": ", entries[i].offset, "}");
  }
  out += "], \"buffers\": [";
  const std::vector<std::string> names = model.BufferNames();
  // Buffers() is not const: the layers hand out mutable views.
  const std::vector<Tensor*> buffers =
      const_cast<Model<float>&>(model).Buffers();
  for (size_t i = 0; i < names.size() && i < buffers.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "",
                    "{\"name\": ", JsonString(model.TensorName(names[i])),
                    ", \"shape\": ", shape(buffers[i]->shape()), "}");
  }
  return out + "]}";
}

CheckpointTensor ParamsTensor(Model<float>& model) {
  const Tensor& p = model.params();
  return {"params", {p.size()}, {p.data(), p.data() + p.size()}};
}

void AppendBufferTensors(Model<float>& model,
                         std::vector<CheckpointTensor>* out) {
  const std::vector<Tensor*> buffers = model.Buffers();
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Tensor& b = *buffers[i];
    out->push_back({absl::StrCat("buffer.", i),
                    {b.size()},
                    {b.data(), b.data() + b.size()}});
  }
}

const float* RestoreParams(const float* from, Model<float>& model) {
  Tensor& p = model.params();
  std::copy(from, from + p.size(), p.data());
  return from + p.size();
}

const float* RestoreBuffers(const float* from, Model<float>& model) {
  for (Tensor* b : model.Buffers()) {
    std::copy(from, from + b->size(), b->data());
    from += b->size();
  }
  return from;
}

std::vector<SparseTableInfo> SparseTableInfos(const Model<float>& model) {
  std::vector<SparseTableInfo> infos;
  const auto& entries = model.param_store().sparse_entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    SparseTableInfo info;
    info.set_id(static_cast<int>(i));
    info.set_name(model.TensorName(entries[i].name));
    info.set_rows(entries[i].shape[0]);
    info.set_dim(static_cast<int>(entries[i].shape[1]));
    info.set_seed(entries[i].seed);
    info.set_bound(1.0 / std::sqrt(static_cast<double>(entries[i].fan_in)));
    infos.push_back(std::move(info));
  }
  return infos;
}

}  // namespace cohort
