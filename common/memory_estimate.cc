#include "common/memory_estimate.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

constexpr int64_t kFloat = 4;  // bytes of a float32 value
constexpr int64_t kIndex = 8;  // bytes of a sampler index (int64)

void Add(MemoryEstimate* e, std::string what, CheckedInt bytes) {
  if (bytes == CheckedInt(0)) return;
  e->total += bytes;
  e->parts.push_back({std::move(what), bytes});
}

// Optimizer state buffers per parameter: SGD's and LARS's momentum buffer
// (only with momentum), Adam's and LAMB's two moments, RMSprop's square
// average (and momentum buffer, and gradient average when centered),
// Adagrad's sum of squares.
int OptimizerSlots(const OptimizerSpec& o) {
  switch (o.kind()) {
    case OptimizerSpec::ADAGRAD:
      return 1;
    case OptimizerSpec::SGD:
    case OptimizerSpec::LARS:
      return o.momentum() != 0 ? 1 : 0;
    case OptimizerSpec::RMSPROP:
      return 1 + (o.momentum() > 0 ? 1 : 0) + (o.centered() ? 1 : 0);
    default:
      return 2;
  }
}

std::string OptimizerState(const OptimizerSpec& o) {
  switch (o.kind()) {
    case OptimizerSpec::SGD:
    case OptimizerSpec::LARS:
      return "momentum";
    case OptimizerSpec::RMSPROP:
      return "RMSPROP averages";
    case OptimizerSpec::ADAGRAD:
      return "ADAGRAD sums";
    default:
      return absl::StrCat(OptimizerSpec::Kind_Name(o.kind()), " moments");
  }
}

// How many copies of each parameter a worker holds, and what they are.
struct Copies {
  int64_t count = 1;
  std::string what = "values";
};

Copies WorkerCopies(const JobSpec& spec, const WorkerMemoryOptions& o) {
  Copies c;
  const int64_t grads = o.gpus ? 1 : o.replicas;
  if (o.model_allocated) {
    c = {grads - 1, absl::StrCat("gradients x", grads - 1, " more replicas")};
  } else {
    c.count += grads;
    absl::StrAppend(&c.what, ", gradients",
                    grads > 1 ? absl::StrCat(" x", grads, " replicas") : "");
  }
  // GPUs keep the optimizer on the device; in PS mode the shards have it;
  // a model run forward has none.
  const int slots = o.gpus || spec.mode() == PS || o.forward_only
                        ? 0
                        : OptimizerSlots(spec.optimizer());
  if (slots > 0) {
    c.count += slots;
    absl::StrAppend(&c.what, ", ", OptimizerState(spec.optimizer()));
  }
  if (o.checkpoints) {
    c.count += 1 + slots;
    absl::StrAppend(&c.what, ", checkpoint copies");
  }
  return c;
}

// Samples of one forward pass: training batches, or evaluation's, which run
// through the same model (its default as common/spec.cc fills it).
int64_t ActivationBatch(const JobSpec& spec) {
  const int64_t batch = std::max(1, spec.batch_size());
  if (spec.eval().disable()) return batch;
  const int64_t eval = spec.eval().batch_size() > 0
                           ? spec.eval().batch_size()
                           : std::min<int64_t>(1000, 4 * batch);
  return std::max(batch, eval);
}

void AddParameters(const JobSpec& spec, const ModelSizes& sizes,
                   const WorkerMemoryOptions& o, MemoryEstimate* e) {
  const Copies copies = WorkerCopies(spec, o);
  if (copies.count == 0) return;
  for (size_t i = 0; i < sizes.layers.size(); ++i) {
    const LayerSizes& l = sizes.layers[i];
    CheckedInt padded = 0;
    for (int64_t p : l.param_tensors) padded += RoundUpTo(p, kParamAlignment);
    const CheckedInt bytes = padded * kFloat * copies.count;
    Add(e,
        absl::StrCat(LayerName(i, l.kind), " needs ", BytesString(bytes),
                     " of parameters (", l.parameters,
                     " parameters: ", copies.what, ")"),
        bytes);
  }
}

// Each layer's output for the largest batch, and backward's gradient
// buffers, counted with the layer whose output they are the gradient of.
void AddActivations(const JobSpec& spec, const ModelSizes& sizes,
                    const WorkerMemoryOptions& o, MemoryEstimate* e) {
  if (o.gpus) return;  // on the devices
  const int64_t batch = ActivationBatch(spec);
  std::vector<CheckedInt> values(sizes.layers.size());
  for (size_t i = 0; i < sizes.layers.size(); ++i) {
    values[i] = CheckedInt(sizes.layers[i].activations) * batch;
  }
  for (const ModelSizes::GradientBuffer& b : sizes.gradient_buffers) {
    if (o.forward_only) break;  // a forward pass makes no gradients
    values[b.layer] += CheckedInt(b.elements) * std::max(1, spec.batch_size());
  }
  for (size_t i = 0; i < sizes.layers.size(); ++i) {
    const LayerSizes& l = sizes.layers[i];
    const CheckedInt bytes = values[i] * kFloat * o.replicas;
    Add(e,
        absl::StrCat(
            LayerName(i, l.kind), " needs ", BytesString(bytes),
            " of activations (", ShapeString(l.output),
            " per sample, batches of ", batch, " samples",
            o.replicas > 1 ? absl::StrCat(", ", o.replicas, " replicas") : "",
            ")"),
        bytes);
  }
}

// Training samples the job reads (data.train_limit applied).
int64_t TrainSamples(const DatasetSpec& d) {
  int64_t n = 0;
  switch (d.kind()) {
    case DatasetSpec::MNIST:
      n = 60000;
      break;
    case DatasetSpec::CIFAR10:
      n = 50000;
      break;
    default:
      n = d.synthetic().train_samples() > 0 ? d.synthetic().train_samples()
                                            : 8192;
  }
  return d.train_limit() > 0 ? std::min(n, d.train_limit()) : n;
}

void AddSyntheticData(const DatasetSpec& d, CheckedInt features,
                      MemoryEstimate* e) {
  const SyntheticSpec& y = d.synthetic();
  const int64_t classes = y.classes() > 0 ? y.classes() : 10;
  const CheckedInt prototypes = features * classes * kFloat;
  Add(e,
      absl::StrCat("data.synthetic.classes needs ", BytesString(prototypes),
                   " for the class prototypes (", classes, " classes x ",
                   features.value(), " values)"),
      prototypes);
  const int64_t test = y.test_samples() > 0 ? y.test_samples() : 2048;
  for (int64_t samples : {TrainSamples(d), test}) {
    const CheckedInt bytes = features * samples * kFloat;
    if (bytes > CheckedInt(kMaxMaterializedSyntheticBytes)) continue;
    Add(e,
        absl::StrCat("the synthetic data set needs ", BytesString(bytes),
                     " for ", samples, " generated samples"),
        bytes + CheckedInt(samples) * kFloat);
  }
}

// Bytes per image and label of the byte-image data sets.
void AddImageData(const DatasetSpec& d, int64_t image_bytes, int64_t test,
                  MemoryEstimate* e) {
  const CheckedInt bytes =
      (CheckedInt(TrainSamples(d)) + test) * (image_bytes + 1);
  Add(e,
      absl::StrCat("the ", DatasetSpec::Kind_Name(d.kind()), " data set needs ",
                   BytesString(bytes)),
      bytes);
}

void AddData(const JobSpec& spec, const ModelSizes& sizes,
             const WorkerMemoryOptions& o, MemoryEstimate* e) {
  const DatasetSpec& d = spec.data();
  const CheckedInt features = NumElements(sizes.input);
  if (d.kind() == DatasetSpec::MNIST) AddImageData(d, 28 * 28, 10000, e);
  if (d.kind() == DatasetSpec::CIFAR10) AddImageData(d, 3 * 32 * 32, 10000, e);
  if (d.kind() == DatasetSpec::SYNTHETIC) AddSyntheticData(d, features, e);
  // The epoch's permutation, and this worker's replicas' shares of it.
  const int64_t samples = TrainSamples(d);
  const int64_t total = std::max(o.replicas, o.total_replicas);
  const int64_t share = samples > 0 ? (samples - 1) / total + 1 : 0;
  const CheckedInt indices =
      CheckedInt(samples) + CheckedInt(share) * o.replicas;
  const CheckedInt index_bytes = indices * kIndex;
  Add(e,
      absl::StrCat(d.kind() == DatasetSpec::SYNTHETIC
                       ? "data.synthetic.train_samples"
                       : "the data set",
                   " needs ", BytesString(index_bytes),
                   " for the sampler's indices (", samples, " samples)"),
      index_bytes);
  // Each replica's ring of prefetched batches and the one it trains on.
  const int64_t ring =
      std::max({d.prefetch(), d.loader_threads(), 1}) + int64_t{1};
  const CheckedInt batches = CheckedInt(ring) * std::max(1, spec.batch_size()) *
                             features * kFloat * o.replicas;
  Add(e,
      absl::StrCat("the loader needs ", BytesString(batches), " for ", ring,
                   " batches of ", spec.batch_size(), " samples of ",
                   ShapeString(sizes.input), " per replica"),
      batches);
}

}  // namespace

const MemoryPart& MemoryEstimate::Largest() const {
  return *std::max_element(parts.begin(), parts.end(),
                           [](const MemoryPart& a, const MemoryPart& b) {
                             return a.bytes < b.bytes;
                           });
}

MemoryEstimate EstimateWorkerMemory(const JobSpec& spec,
                                    const ModelSizes& sizes,
                                    const WorkerMemoryOptions& options) {
  WorkerMemoryOptions o = options;
  o.replicas = std::max(1, o.replicas);
  MemoryEstimate e;
  AddParameters(spec, sizes, o, &e);
  AddActivations(spec, sizes, o, &e);
  if (!o.forward_only) AddData(spec, sizes, o, &e);
  return e;
}

MemoryEstimate EstimateShardMemory(const JobSpec& spec, int64_t elements,
                                   int64_t total) {
  const OptimizerSpec& opt = spec.optimizer();
  int64_t copies = 2 + OptimizerSlots(opt);  // values, a staging buffer
  std::string what = "values, a push buffer";
  if (spec.ps().consistency() == SYNC) {
    ++copies;
    what += ", the step's gradient sum";
  }
  if (OptimizerSlots(opt) > 0)
    absl::StrAppend(&what, ", ", OptimizerState(opt));
  const CheckedInt bytes = CheckedInt(elements) * kFloat * copies;
  MemoryEstimate e;
  Add(&e,
      absl::StrCat("its ", elements, " of the job's ", total,
                   " parameters need ", BytesString(bytes), " (", what, ")"),
      bytes);
  return e;
}

MemoryEstimate Times(const MemoryEstimate& estimate, int n,
                     absl::string_view each) {
  MemoryEstimate e;
  for (const MemoryPart& p : estimate.parts) {
    Add(&e, absl::StrCat(p.what, " x ", n, " ", each), p.bytes * n);
  }
  return e;
}

std::string BytesString(CheckedInt bytes) {
  if (bytes.overflow()) return "more than 8 EiB";
  return BytesString(bytes.value());
}

absl::Status CheckNoOverflow(const MemoryEstimate& estimate) {
  if (!estimate.total.overflow()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(estimate.Largest().what,
                   ": sizes past 2^63 bytes, more than any machine has"));
}

absl::Status CheckMemoryFits(const MemoryEstimate& estimate,
                             const AvailableMemory& available,
                             absl::string_view who) {
  if (estimate.parts.empty() ||
      !(estimate.total > CheckedInt(available.bytes))) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      estimate.Largest().what, "; ", who, " needs ",
      BytesString(estimate.total), " in all and this machine has ",
      BytesString(available.bytes), " available (", available.source, ")"));
}

}  // namespace cohort
